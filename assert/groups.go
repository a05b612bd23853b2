package assert

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
)

// perGroup judges a job object that Kueue admits as several Workloads (a
// LeaderWorkerSet of more than one group: one Workload per group, all of
// which MultiKueue must place on one worker, where one copy serves them)
// group by group: it waits until the manager has a Workload for each group
// the manager's object asks for, then runs judge on each Workload and joins
// the failures. A group's Workload placed on another worker than the
// others' fails judge there (the copy the others use is on a worker its
// placement does not name). ok is false for every other object (a Workload,
// a kind with one Workload, a LeaderWorkerSet of one group): the caller
// judges it itself.
func (c *Checker) perGroup(ctx context.Context, assertion string, job client.Object, judge func(context.Context, client.Object) error) (ok bool, err error) {
	kind, known := observe.JobKindOf(job)
	if !known || !observe.CopyServesWorkloads(kind) {
		return false, nil
	}
	mgr := c.Topo.Manager.Name
	cur := job.DeepCopyObject().(client.Object)
	if err := c.reader(mgr).Get(ctx, client.ObjectKeyFromObject(job), cur); err != nil {
		return false, nil // resolve waits for it and names what is missing
	}
	n := observe.WorkloadCount(cur)
	if n <= 1 {
		return false, nil
	}
	ref := fmt.Sprintf("%s %s/%s", kind, cur.GetNamespace(), cur.GetName())
	var wls []kueue.Workload
	progress := func() time.Time {
		return c.Obs.LastProgress(func(_ observe.Kind, ns, name string) bool { return ns == cur.GetNamespace() && name == cur.GetName() })
	}
	waitErr := poll.UntilIdle(ctx, c.timeout(), c.maxWait(), fmt.Sprintf("cluster %q: a Workload for each of the %d groups of %s", mgr, n, ref), progress, func(ctx context.Context) error {
		var err error
		if wls, err = observe.WorkloadsOf(ctx, c.reader(mgr), cur.GetNamespace(), cur.GetUID()); err != nil {
			return err
		}
		if len(wls) < n {
			return fmt.Errorf("%d of %d group Workloads", len(wls), n)
		}
		return nil
	})
	if waitErr != nil {
		return true, c.fail(ctx, &Failure{Assertion: assertion, Object: ref,
			Expected: fmt.Sprintf("a manager Workload for each of its %d groups (spec.replicas on the manager)", n), Problems: []string{waitErr.Error()}})
	}
	var errs []error
	for _, wl := range wls {
		errs = append(errs, judge(ctx, &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: wl.Name}}))
	}
	return true, errors.Join(errs...)
}
