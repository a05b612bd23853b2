package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// AllAtOnce is the AllAtOnce-dispatcher scenario: on a topology whose
// manager runs the AllAtOnce dispatcher (the default), it runs Dispatch
// (NominationCleared then checks that each workload's first nomination
// named every Active worker) and checks that every nominated worker got a
// copy of the workload. The error joins every failed check; a topology with
// another dispatcher is an error naming Options.Kueue.Dispatcher.
func AllAtOnce(ctx context.Context, env *Env, o DispatchOptions) (DispatchResult, error) {
	r, err := begin(env, "AllAtOnce")
	if err != nil {
		return DispatchResult{}, err
	}
	if err := r.needDispatcher(topology.DispatcherAllAtOnce); err != nil {
		return DispatchResult{}, err
	}
	objs, err := r.dispatchObjects(&o, "DispatchOptions")
	if err != nil {
		return DispatchResult{}, err
	}
	res, err := r.dispatch(ctx, objs, o)
	errs := []error{err}
	for _, ob := range objs {
		errs = append(errs, r.copiesOnNominated(ctx, ob))
	}
	return res, errors.Join(errs...)
}

// AllAtOnce runs AllAtOnce and reports its error.
func (r *Runner) AllAtOnce(ctx context.Context, o DispatchOptions) (DispatchResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, AllAtOnce, o)
}

// needDispatcher checks the manager's dispatcher.
func (r *run) needDispatcher(want string) error {
	if got := r.env.Topo.Spec.Kueue.Dispatcher; got != want {
		return r.errorf("the manager's MultiKueue dispatcher is %q, want %q (topology.Options.Kueue.Dispatcher)", got, want)
	}
	return nil
}

// copiesOnNominated checks that, before the workload's first placement,
// every worker of its first nomination got a copy (a Workload with the
// origin label).
func (r *run) copiesOnNominated(ctx context.Context, o client.Object) error {
	key, err := r.workloadKey(ctx, o)
	if err != nil {
		return err
	}
	evs, _ := r.env.Obs.History(observe.KindWorkload, key.Namespace, key.Name)
	mgr := r.env.Topo.Manager.Name
	var nominated []string
	got := map[string]bool{}
	for _, e := range evs {
		switch {
		case e.Cluster == mgr && e.Type == observe.Nominated && nominated == nil && len(e.Values) > 0:
			nominated = slices.Clone(e.Values)
		case e.Cluster != mgr && e.Type == observe.Created && e.Labels[observe.LabelOrigin] != "":
			got[e.Cluster] = true
		}
	}
	var missing []string
	for _, w := range nominated {
		if !got[w] {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return r.errorf("Workload %s of %s was nominated to [%s] but got no copy on %s",
			key, ref(o), strings.Join(nominated, ","), fmt.Sprintf("%q", missing))
	}
	return nil
}
