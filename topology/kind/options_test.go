package kind

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
)

func TestOptionsDefaults(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.NamePrefix != DefaultNamePrefix || o.NodeImage != "" || o.Parallel != DefaultParallel ||
		o.WaitForReady != DefaultWaitForReady || o.InstallTimeout != install.DefaultTimeout || o.Keep {
		t.Errorf("defaults: %+v", o)
	}
	kn, err := o.kindName("topology.Options.WorkerNames[0]", "worker-1")
	if err != nil || kn != "mktk-worker-1" {
		t.Errorf("kindName = %q, %v", kn, err)
	}
}

func TestOptionsErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		field string
	}{
		{Options{NodeImage: "kindest/node:v1.35.8 extra"}, "Options.NodeImage"},
		{Options{Runtime: "lxc"}, "Options.Runtime"},
		{Options{Parallel: -1}, "Options.Parallel"},
		{Options{WaitForReady: -time.Second}, "Options.WaitForReady"},
		{Options{InstallTimeout: -time.Second}, "Options.InstallTimeout"},
		{Options{ExtraImages: []string{"ok:1", " "}}, "Options.ExtraImages[1]"},
	} {
		_, err := tc.o.withDefaults()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: error %v does not name %s", tc.o, err, tc.field)
		}
	}
}

func TestKindNameMustMakeAValidControlPlaneHost(t *testing.T) {
	o, _ := Options{NamePrefix: "Upper-"}.withDefaults()
	_, err := o.kindName("topology.Options.ManagerName", "manager")
	if err == nil || !strings.Contains(err.Error(), "Options.NamePrefix") || !strings.Contains(err.Error(), "topology.Options.ManagerName") {
		t.Errorf("error %v does not name the prefix and the field", err)
	}
	o, _ = Options{NamePrefix: strings.Repeat("x", 45) + "-"}.withDefaults()
	_, err = o.kindName("topology.Options.WorkerNames[0]", "worker-1")
	if err == nil || !strings.Contains(err.Error(), "control-plane host name") {
		t.Errorf("a 63+ character host name was accepted: %v", err)
	}
}

// New refuses bad input before it looks for a container runtime or creates
// anything, so these run everywhere.
func TestNewRefusesBadInputFirst(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no runtime: an error from detection would mean validation came too late
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		opts  topology.Options
		o     Options
		field string
	}{
		{"kind option", topology.Options{Workers: 1}, Options{Parallel: -2}, "Options.Parallel"},
		{"topology option", topology.Options{Workers: 0}, Options{}, "Options.Workers"},
		{"name too long for a host", topology.Options{WorkerNames: []string{strings.Repeat("w", 50)}}, Options{}, "topology.Options.WorkerNames[0]"},
		{"ray", topology.Options{Workers: 1, Kueue: topology.KueueOptions{Integrations: []string{topology.IntegrationBatchJob, topology.IntegrationRayJob}}}, Options{}, "topology.Options.Kueue.Integrations[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := New(ctx, tc.opts, tc.o)
			if err == nil {
				topo.Close(ctx)
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
	_, err := New(ctx, topology.Options{Workers: 1, Kueue: topology.KueueOptions{Integrations: []string{topology.IntegrationRayCluster}}}, Options{})
	if !errors.Is(err, ErrNoKubeRayImage) {
		t.Errorf("Ray integration: %v does not wrap ErrNoKubeRayImage", err)
	}
}
