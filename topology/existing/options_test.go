package existing

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/multikueue-testkit/testkit/topology"
)

// Bad input gets one clear error naming the field.
func TestOptionsErrorsNameTheField(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	ok := func(n string) Cluster { return Cluster{Name: n, Config: cfg} }
	for _, tc := range []struct {
		name string
		o    Options
		opts topology.Options
		want string
	}{
		{"no mode", Options{Manager: ok("m"), Workers: []Cluster{ok("w")}}, topology.Options{}, "Options.Mode: empty"},
		{"unknown mode", Options{Mode: "steal", Manager: ok("m"), Workers: []Cluster{ok("w")}}, topology.Options{}, `Options.Mode: "steal"`},
		{"no workers", Options{Mode: ModeWire, Manager: ok("m")}, topology.Options{}, "Options.Workers: no worker"},
		{"nameless manager", Options{Mode: ModeWire, Manager: Cluster{Config: cfg}, Workers: []Cluster{ok("w")}}, topology.Options{}, "Options.Manager.Name: empty"},
		{"worker without config", Options{Mode: ModeWire, Manager: ok("m"), Workers: []Cluster{{Name: "w"}}}, topology.Options{}, `Options.Workers[0].Config: nil for cluster "w"`},
		{"worker without host", Options{Mode: ModeWire, Manager: ok("m"), Workers: []Cluster{{Name: "w", Config: &rest.Config{}}}}, topology.Options{}, `Options.Workers[0].Config.Host: empty`},
		{"conflicting worker names", Options{Mode: ModeWire, Manager: ok("m"), Workers: []Cluster{ok("w")}}, topology.Options{WorkerNames: []string{"x"}}, "topology.Options.WorkerNames: [x], but Options.Workers are named [w]"},
		{"duplicate names", Options{Mode: ModeWire, Manager: ok("m"), Workers: []Cluster{ok("w"), ok("w")}}, topology.Options{}, "duplicate cluster name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), tc.opts, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want it to contain %q", err, tc.want)
			}
		})
	}
}

// CAPI's ClusterProxy shape is enough.
type proxy struct{ cfg *rest.Config }

func (proxy) GetName() string               { return "capz-worker" }
func (p proxy) GetRESTConfig() *rest.Config { return p.cfg }

func TestProxy(t *testing.T) {
	c := Proxy(proxy{&rest.Config{Host: "https://10.0.0.1:443"}})
	if c.Name != "capz-worker" || c.Config.Host != "https://10.0.0.1:443" {
		t.Fatalf("Proxy = %+v", c)
	}
}
