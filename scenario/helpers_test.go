package scenario_test

import (
	"errors"
	"slices"
	"strings"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// redonePlacements returns the Jobs of objs whose ExactlyOnceAdmitted
// failure among errs says MultiKueue redid the placement on another worker
// because the manager never recorded the first (assert.RedonePlacement):
// seen with Kueue v0.19.2 under load, when the patch that sets
// status.clusterName loses an update conflict. The other checks of those
// Jobs then fail on the same cause.
func redonePlacements(errs []error, objs []client.Object) []string {
	var out []string
	for _, e := range errs {
		var f *assert.Failure
		if !errors.As(e, &f) || f.Assertion != "ExactlyOnceAdmitted" || !strings.Contains(strings.Join(f.Problems, "\n"), assert.RedonePlacement) {
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
