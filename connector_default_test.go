package testkit_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/capz"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/kind"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// noDefault is a provider that picks no connector: topology.New must refuse
// a nil one naming the field. It provisions nothing.
type noDefault struct{}

func (noDefault) Name() string { return "no-default" }
func (noDefault) Provision(context.Context, topology.Spec) (*topology.Cluster, []*topology.Cluster, error) {
	return nil, nil, nil
}
func (noDefault) Close(context.Context) error { return nil }

// TestOneConnectorPolicy: with Options.Connector nil, every provider and
// every entry point picks the connector by connect.Default (one function,
// reading $MKTK_CONNECTOR and $MKTK_GUARD; kind then only sets where the
// ClusterProfile plugin lives in Kueue's pod); a bad value is one error naming
// the variable, from each entry point, before anything starts; a nil
// connector no provider defaults is an error naming the field, never a
// panic.
func TestOneConnectorPolicy(t *testing.T) {
	for _, tc := range []struct {
		connector, guard string
		want             topology.Connector
		err              string
	}{
		{"", "", connect.KubeconfigSecret{}, ""},
		{"kubeconfig", "0", connect.KubeconfigSecret{}, ""},
		{"clusterprofile", "", connect.ClusterProfile{}, ""},
		{"cluster-profile", "1", connect.ClusterProfile{Guard: true}, ""},
		{"", "true", connect.KubeconfigSecret{Guard: true}, ""},
		{"bogus", "", nil, `MKTK_CONNECTOR="bogus": not a connector`},
		{"", "yes", nil, `MKTK_GUARD="yes"`},
	} {
		t.Run(tc.connector+"/"+tc.guard, func(t *testing.T) {
			t.Setenv(connect.EnvConnector, tc.connector)
			t.Setenv(connect.EnvGuard, tc.guard)
			providers := map[string]topology.ConnectorDefaulter{
				"local": local.NewProvider(local.Options{}), "kind": &kind.Provider{},
				"capz": &capz.Provider{}, "existing": existing.NewProvider(existing.Options{}),
			}
			for name, p := range providers {
				got, err := p.DefaultConnector()
				want := tc.want
				if cp, ok := want.(connect.ClusterProfile); ok && name == "kind" {
					// On kind the plugin runs in Kueue's pod, where the
					// provider puts it: the one change it makes.
					cp.PluginCommand = kind.PluginCommand
					want = cp
				}
				switch {
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Errorf("provider %s: %v; want an error containing %q", name, err, tc.err)
				case tc.err == "" && (err != nil || !reflect.DeepEqual(got, want)):
					t.Errorf("provider %s: %#v, %v; want %#v", name, got, err, want)
				}
			}
		})
	}
}

// TestEntryPointsShareTheConnectorDefault: each entry point, given no
// connector and a $MKTK_CONNECTOR that names none, fails with the one
// error of connect.Default before it starts or contacts anything.
func TestEntryPointsShareTheConnectorDefault(t *testing.T) {
	ctx := context.Background()
	t.Setenv(connect.EnvConnector, "bogus")
	unreachable := &rest.Config{Host: "https://127.0.0.1:1"}
	want := `MKTK_CONNECTOR="bogus": not a connector`
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"local.New", func() error {
			_, err := local.New(ctx, topology.Options{}, local.Options{})
			return err
		}, want},
		{"topology.New(local.NewProvider)", func() error {
			_, err := topology.New(ctx, local.NewProvider(local.Options{}), topology.Options{})
			return err
		}, want},
		{"existing.New (wire)", func() error {
			_, err := existing.New(ctx, topology.Options{}, existing.Options{Mode: existing.ModeWire,
				Manager: existing.Cluster{Name: "manager", Config: unreachable}, Workers: []existing.Cluster{{Name: "worker-1", Config: unreachable}}})
			return err
		}, want},
		{"kind.New", func() error {
			if _, err := kind.Detect(ctx, ""); err != nil {
				t.Skipf("no container runtime for kind: %v", err)
			}
			_, err := kind.New(ctx, topology.Options{Workers: 1}, kind.Options{})
			return err
		}, want},
		{"topology.New(a provider with no default)", func() error {
			_, err := topology.New(ctx, noDefault{}, topology.Options{})
			return err
		}, "topology: Options.Connector: nil, and provider no-default picks no default"},
		{"local.Provider.Provision with no connector", func() error {
			spec, err := topology.Options{Workers: 1}.Resolve()
			if err != nil {
				return err
			}
			p := local.NewProvider(local.Options{})
			defer p.Close(ctx)
			_, _, err = p.Provision(ctx, spec)
			return err
		}, "local: Spec.Connector: nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestCheckerTakesTheTopologysPace: assert.New waits as long as
// Topology.Timeouts says, so Options.Timeouts is the one place to raise it.
func TestCheckerTakesTheTopologysPace(t *testing.T) {
	spec, err := topology.Options{Workers: 1, Timeouts: topology.Timeouts{Progress: 7 * time.Minute}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if got := assert.New(&topology.Topology{Spec: spec}, nil).Timeout; got != 7*time.Minute {
		t.Errorf("Checker.Timeout = %s; want the 7m0s of Options.Timeouts.Progress", got)
	}
	if got := assert.New(&topology.Topology{}, nil).Timeout; got != assert.DefaultTimeout {
		t.Errorf("Checker.Timeout = %s; want DefaultTimeout where nothing says otherwise", got)
	}
	if got := (&kind.Provider{}).SuggestedTimeouts(); got.Start < time.Minute || got.Progress < time.Minute {
		t.Errorf("kind suggests %+v; want minutes", got)
	}
	if got := (&capz.Provider{}).SuggestedTimeouts(); got != capz.AKSTimeouts() {
		t.Errorf("capz suggests %+v; want AKSTimeouts %+v", got, capz.AKSTimeouts())
	}
}
