package assert

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
)

// PlacementRecorded checks that the manager recorded where the workload ran:
// its Workload's status.clusterName named a worker before the Workload
// finished or was deleted. It waits (as long as the topology progresses; see
// Checker.Timeout) for the clusterName or the end.
//
// The other placement checks (ExactlyOnceAdmitted, LosersCleaned,
// StatusSynced) judge what the workers did even when the manager kept no
// record; this one judges the record. Kueue v0.19.2 loses it for short jobs
// under load: MultiKueue creates the remote job before the status patch
// that sets clusterName, and when that patch loses an update conflict and
// the remote job finishes before the retry, the next reconcile finishes the
// manager Workload from the remote one without recording the placement (nor
// admitting it on the manager). The failure names the worker the remote job
// ran on, read from the workers.
func (c *Checker) PlacementRecorded(ctx context.Context, job client.Object) error {
	if ok, err := c.perGroup(ctx, "PlacementRecorded", job, c.PlacementRecorded); ok {
		return err
	}
	t, err := c.resolveFor(ctx, "PlacementRecorded", job)
	if err != nil {
		return err
	}
	mgr := c.Topo.Manager.Name
	waitErr := pollHistory(ctx, c, t, fmt.Sprintf("cluster %q: %s to get a status.clusterName", mgr, t), func() error {
		wl, _ := c.history(t)
		if cy, _ := cyclesOf(wl, mgr); len(cy) > 0 {
			return nil
		}
		if _, ended := endedUnplaced(wl, mgr); ended {
			return nil
		}
		return fmt.Errorf("%s has no status.clusterName yet", t)
	})
	wl, jobs := c.history(t)
	var problems []string
	if recorded, _ := cyclesOf(wl, mgr); len(recorded) == 0 {
		end, ended := endedUnplaced(wl, mgr)
		switch cy, _ := placements(wl, jobs, mgr); {
		case ended && len(cy) == 1:
			t0 := firstTime(wl, jobs)
			p := fmt.Sprintf("cluster %q: %s ended at %s without a status.clusterName, though its remote %s ran on %q (from %s)",
				mgr, t, rel(end, t0), t.jobKind, cy[0].cluster, rel(cy[0].start, t0))
			if !hasEvent(wl, mgr, observe.Admitted) {
				p += "; the manager Workload was never Admitted either"
			}
			problems = append(problems, p)
		case ended:
			problems = append(problems, fmt.Sprintf("cluster %q: %s ended without a status.clusterName, and no worker got a remote %s or admitted a copy", mgr, t, t.jobKind))
		case waitErr != nil:
			problems = append(problems, c.waited(ctx, t, waitErr)...)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return c.fail(ctx, &Failure{
		Assertion: "PlacementRecorded",
		Object:    t.String(),
		Expected:  "the manager Workload's status.clusterName names the worker it ran on before the Workload ends",
		Problems:  problems,
		Timeline:  c.timeline(wl, jobs),
	}, t.refs(c)...)
}
