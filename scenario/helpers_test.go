package scenario_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

func hasCreatedOn(evs []observe.Event, cluster string) bool {
	for _, e := range evs {
		if e.Cluster == cluster && e.Type == observe.Created {
			return true
		}
	}
	return false
}

// nominations returns the nomination and placement events on the manager of
// every Workload in namespace ns.
func nominations(env *scenario.Env, ns string) []observe.Event {
	var out []observe.Event
	for _, k := range env.Obs.Objects(observe.KindWorkload) {
		if k.Namespace != ns {
			continue
		}
		evs, _ := env.Obs.History(observe.KindWorkload, k.Namespace, k.Name)
		for _, e := range evs {
			if e.Cluster == env.Topo.Manager.Name && (e.Type == observe.Nominated || e.Type == observe.ClusterNameSet) {
				out = append(out, e)
			}
		}
	}
	return out
}

// redonePlacements returns the Jobs of objs whose ExactlyOnceAdmitted or
// LosersCleaned failure among errs says MultiKueue redid the placement or
// the dispatch because the manager never recorded the first placement
// (assert.RedonePlacement, assert.RedoneDispatch): seen with Kueue v0.19.2
// under load, when the patch that sets status.clusterName loses an update
// conflict, and when Kueue stops between creating the remote Job and
// writing status.clusterName (CI, 2026-12-03: the restarted Kueue
// dispatched again and a second worker admitted a copy while the first
// worker's Job finished). The other checks of those Jobs then fail on the
// same cause.
func redonePlacements(errs []error, objs []client.Object) []string {
	var out []string
	for _, e := range errs {
		var f *assert.Failure
		if !errors.As(e, &f) || (f.Assertion != "ExactlyOnceAdmitted" && f.Assertion != "LosersCleaned") {
			continue
		}
		if p := strings.Join(f.Problems, "\n"); !strings.Contains(p, assert.RedonePlacement) && !strings.Contains(p, assert.RedoneDispatch) {
			continue
		}
		for _, o := range objs {
			j := o.GetNamespace() + "/" + o.GetName()
			if mentionsJob(e, []string{j}) != "" && !slices.Contains(out, j) {
				out = append(out, j)
			}
		}
	}
	return out
}

// ensureTrainingRuntime creates the ClusterTrainingRuntime built TrainJobs
// refer to (workload.DefaultTrainingRuntime) on every cluster of env where
// it is missing, for a test that creates TrainJobs itself (Dispatch does it
// for its own).
func ensureTrainingRuntime(t *testing.T, env *scenario.Env) {
	t.Helper()
	ctx := context.Background()
	for _, c := range append([]*topology.Cluster{env.Topo.Manager}, env.Topo.Workers...) {
		err := c.Client.Create(ctx, workload.NewClusterTrainingRuntime(workload.DefaultTrainingRuntime))
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("cluster %q: create ClusterTrainingRuntime %q: %v", c.Name, workload.DefaultTrainingRuntime, err)
		}
		if err := scenario.RuntimeKnown(ctx, c, workload.DefaultTrainingRuntime, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
}

// namedCheck is a per-workload assertion and its name.
type namedCheck struct {
	name  string
	check func(context.Context, client.Object) error
}

// placementChecks are c's assertions of a workload's placement:
// ExactlyOnceAdmitted, NominationCleared and LosersCleaned.
func placementChecks(c *assert.Checker) []namedCheck {
	return []namedCheck{{"ExactlyOnceAdmitted", c.ExactlyOnceAdmitted}, {"NominationCleared", c.NominationCleared}, {"LosersCleaned", c.LosersCleaned}}
}

// checkEach runs every check on obj, in order, and fails t with each that
// fails, its error led by prefix and the check's name.
func checkEach(t *testing.T, ctx context.Context, prefix string, obj client.Object, checks ...namedCheck) {
	t.Helper()
	for _, a := range checks {
		if err := a.check(ctx, obj); err != nil {
			t.Errorf("%s%s: %v", prefix, a.name, err)
		}
	}
}
