package assert

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
)

// Finished waits (as long as the topology progresses; see Checker.Timeout)
// until the job's manager Workload is Finished. On timeout the error carries
// the workload's and job's timelines.
func (c *Checker) Finished(ctx context.Context, job client.Object) error {
	t, err := c.resolveFor(ctx, "Finished", job)
	if err != nil {
		return err
	}
	if observe.NeverFinishes(t.jobKind) {
		return &Limitation{Assertion: "Finished", Object: t.jobRef(),
			Why: fmt.Sprintf("a %s runs until it is deleted: its Workload is never Finished", t.jobKind)}
	}
	mgr := c.Topo.Manager.Name
	err = pollHistory(ctx, c, t, fmt.Sprintf("cluster %q: %s to be Finished", mgr, t), func() error {
		wl, _ := c.history(t)
		if !hasEvent(wl, mgr, observe.Finished) {
			return fmt.Errorf("%s is not Finished", t)
		}
		return nil
	})
	if err == nil {
		return nil
	}
	wl, jobs := c.history(t)
	return c.fail(ctx, &Failure{Assertion: "Finished", Object: t.String(), Expected: "the manager Workload to be Finished",
		Problems: c.waited(ctx, t, err), Timeline: c.timeline(wl, jobs)}, t.refs(c)...)
}

// pollHistory waits for check to pass, judged as liveness: it gives up
// once Timeout has passed with no progress anywhere else in the topology
// (no Workload or job event the Observer recorded for an object other
// than t's), or once MaxWait (default 10 × Timeout) has passed in all.
// Under load a workload waits its turn for as long as others move; a
// stalled topology fails after Timeout.
func pollHistory(ctx context.Context, c *Checker, t target, what string, check func() error) error {
	skip := func(_ observe.Kind, namespace, name string) bool {
		return namespace == t.namespace && (name == t.workload || name == t.job)
	}
	return poll.UntilIdle(ctx, c.timeout(), c.maxWait(), what, func() time.Time { return c.Obs.LastProgress(skip) },
		func(context.Context) error { return check() })
}
