package scenario_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
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
// Then it cuts one worker's connection with connect.Sever and restores it,
// rotates the busiest worker's credentials while Jobs run
// (RotateCredentials must pass), and rotates them once more to an identity
// that may not create, where it must fail naming the new credentials.
func TestDispatchWithEachConnector(t *testing.T) {
	for _, c := range connectors() {
		t.Run(c.Name(), func(t *testing.T) {
			ctx := context.Background()
			start := time.Now()
			topo, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 2, Connector: c, Progress: testlog.Writer(t)}, local.Options{})
			t.Logf("Active and observed after %s", time.Since(start).Round(time.Millisecond))
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

			// The credentials of the busiest worker are rotated while its Jobs
			// run: a new identity written where this connector keeps them,
			// the old one revoked after the overlap.
			// The topology is seen as attached (no cluster has a Lifecycle),
			// as existing, kind and CAPZ hand theirs over.
			start = time.Now()
			res, err := scenario.RotateCredentials(ctx, attached(env), scenario.RotateOptions{})
			if err != nil {
				t.Fatalf("RotateCredentials: %v", err)
			}
			t.Logf("%s: %s rotated to %s in %s (written to %s) with %v in flight; old token refused %s after the rotation; %d Jobs undisrupted in %s",
				res.Worker, res.Old, res.New, res.Rotated.Sub(start).Round(time.Millisecond), res.Source, res.InFlight,
				res.Revoked.Sub(res.Rotated).Round(time.Millisecond), len(res.Objects), time.Since(start).Round(time.Millisecond))
			if res.Credentials.User != res.New || len(res.InFlight) == 0 {
				t.Errorf("want the new identity checked (got %q) and Jobs in flight at the rotation (got %v)", res.Credentials.User, res.InFlight)
			}

			// A rotation to an identity that may not create anything (every
			// other right MultiKueue uses kept, the guard's probe among
			// them) leaves MultiKueue unable to make copies on the worker:
			// the scenario must fail and name the new credentials.
			var rules []rbacv1.PolicyRule
			for _, r := range connect.WorkerRules(topo.Spec.Kueue.Integrations) {
				r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "create" })
				rules = append(rules, r)
			}
			start = time.Now()
			// The worker is the one running the most of its Jobs, not a
			// fixed one: with all-at-once dispatch every Job may land on
			// the same worker (seen in a fresh-clone run under load).
			res, err = scenario.RotateCredentials(ctx, attached(env), scenario.RotateOptions{
				Dispatch: scenario.DispatchOptions{NamePrefix: "rotate-broken"}, Identity: connect.RotateOptions{Rules: rules}})
			t.Logf("rotation to %s that may not create, %s: %v", res.New, time.Since(start).Round(time.Millisecond), err)
			if err == nil {
				t.Fatal("RotateCredentials passed with a new identity that has no rights on the worker")
			}
			for _, want := range []string{"scenario RotateCredentials", "the new credentials for " + res.Worker, res.New} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("RotateCredentials' failure lacks %q:\n%v", want, err)
				}
			}
		})
	}
}
