package scenario_test

import (
	"context"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// connectors are the interchangeable connectors, as local.New's default
// would pick them with MKTK_CONNECTOR=kubeconfig|clusterprofile.
func connectors() []topology.Connector {
	return []topology.Connector{connect.KubeconfigSecret{Guard: true}, connect.ClusterProfile{Guard: true}}
}

// TestDispatchWithEachConnector runs the dispatch scenario (Dispatch of batch/Jobs:
// exactly once admitted, nominations cleared, finished, no orphans) on a
// 1 manager + 2 worker topology once per connector, in CI, so that the
// ClusterProfile path is held to the same body as the kubeconfig Secret.
// Whole suites switch with MKTK_CONNECTOR instead (see connect.FromEnv).
// Then it cuts one worker's connection with connect.Sever and restores it.
func TestDispatchWithEachConnector(t *testing.T) {
	for _, c := range connectors() {
		t.Run(c.Name(), func(t *testing.T) {
			ctx := context.Background()
			start := time.Now()
			topo, err := local.New(ctx, topology.Options{Workers: 2, Connector: c, Progress: testlog.Writer(t)}, local.Options{})
			if err != nil {
				t.Fatal(err)
			}
			topo.CloseWith(t)
			t.Logf("Active after %s", time.Since(start).Round(time.Millisecond))
			env, err := scenario.Observe(ctx, topo)
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			if err := env.Check.SetupActive(ctx); err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			if _, err := scenario.Dispatch(ctx, env, scenario.DispatchOptions{Jobs: 6, Kinds: []observe.Kind{observe.KindJob}}); err != nil {
				t.Fatal(err)
			}
			t.Logf("6 Jobs dispatched, finished and cleaned up in %s", time.Since(start).Round(time.Millisecond))

			// connect.Sever cuts this connector's connection (the Secret's
			// kubeconfig or the ClusterProfile's access provider): Kueue
			// marks the worker Inactive, and Active again once restored.
			start = time.Now()
			w := topo.Workers[0].Name
			s, err := connect.Sever(ctx, topo.Manager, topo.Spec.Kueue.Namespace, w, "")
			if err != nil {
				t.Fatal(err)
			}
			inactive := env.Check.ClusterInactive(ctx, w, "")
			if err := s.Restore(ctx); err != nil {
				t.Fatal(err)
			}
			if inactive != nil {
				t.Fatalf("%s cut: %v", s.Source, inactive)
			}
			if err := env.Check.ClusterActive(ctx, w); err != nil {
				t.Fatalf("%s restored: %v", s.Source, err)
			}
			t.Logf("%s cut and restored: Inactive and Active again in %s", s.Source, time.Since(start).Round(time.Millisecond))
		})
	}
}
