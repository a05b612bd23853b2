package assert

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
)

// Finished waits (up to Timeout) until the job's manager Workload is Finished.
// On timeout the error carries the workload's and job's timelines.
func (c *Checker) Finished(ctx context.Context, job client.Object) error {
	t, err := c.resolveFor(ctx, "Finished", job)
	if err != nil {
		return err
	}
	mgr := c.Topo.Manager.Name
	err = pollHistory(ctx, c, fmt.Sprintf("cluster %q: %s to be Finished", mgr, t), func() error {
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

func pollHistory(ctx context.Context, c *Checker, what string, check func() error) error {
	return poll.Until(ctx, c.timeout(), what, func(context.Context) error { return check() })
}
