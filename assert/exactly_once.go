package assert

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
)

// ExactlyOnceAdmitted checks, over the recorded history of the job's Workload
// and job object on every cluster, that each admission cycle (clusterName set
// on the manager until it is reset) admitted the workload on exactly one
// worker:
//
//   - the manager's status.clusterName names one worker W and does not change
//     within the cycle;
//   - W's remote copy held an admitted quota reservation;
//   - no other worker's copy gained a quota reservation or admission after W
//     was selected (allowing DefaultSkew for informer delivery), however
//     briefly;
//   - the remote job object was created on W only, carrying
//     kueue.x-k8s.io/prebuilt-workload-name=<workload>, and on no other worker.
//
// Remote copies are told by MultiKueue's origin label, never by name: a
// worker's own object of the same name (foreign) is not blamed as a copy.
// When W got no copy because a foreign job object of that name was there
// (MultiKueue then never creates its own, kubernetes-sigs/kueue#12404), it
// says so.
//
// A cycle starts when the manager's clusterName is set or, if earlier, when
// the remote job appears on that worker (MultiKueue creates it before its
// status write lands). When the manager Workload ended without ever getting
// a clusterName although a worker got the remote job (see
// PlacementRecorded, which judges that), the cycle is read from the
// workers: it runs from that remote job's creation to the manager's end.
//
// It first waits (as long as the topology progresses; see Checker.Timeout)
// until the manager selected a worker and the remote job appeared there. It
// does not judge the race before selection: with the AllAtOnce dispatcher
// several workers may reserve quota for their copies until MultiKueue picks
// one; LosersCleaned judges their removal.
func (c *Checker) ExactlyOnceAdmitted(ctx context.Context, job client.Object) error {
	if ok, err := c.perGroup(ctx, "ExactlyOnceAdmitted", job, c.ExactlyOnceAdmitted); ok {
		return err
	}
	t, err := c.resolveFor(ctx, "ExactlyOnceAdmitted", job)
	if err != nil {
		return err
	}
	mgr := c.Topo.Manager.Name
	waitErr := pollHistory(ctx, c, t, fmt.Sprintf("cluster %q: %s to be placed on a worker with its remote Job", mgr, t), func() error {
		wl, jobs := c.history(t)
		cycles, _ := placements(wl, jobs, mgr)
		if len(cycles) == 0 {
			if err := neverPlaced(wl, mgr, t); err != nil {
				return err
			}
			return fmt.Errorf("cluster %q: %s has no status.clusterName yet", mgr, t)
		}
		last := cycles[len(cycles)-1]
		if !hasEvent(jobs, last.cluster, observe.Created) && !hasEvent(wl, mgr, observe.Finished) && !c.foreignPresent(t, last.cluster) {
			return fmt.Errorf("cluster %q: no remote %s yet", last.cluster, t.jobRef())
		}
		return nil
	})
	wl, jobs := c.history(t)
	cycles, problems := placements(wl, jobs, mgr)
	if waitErr != nil {
		problems = append(problems, c.waited(ctx, t, waitErr)...)
	}
	problems = append(problems, c.judgeCycles(t, cycles, wl, jobs)...)
	if len(problems) == 0 {
		return nil
	}
	return c.fail(ctx, &Failure{
		Assertion: "ExactlyOnceAdmitted",
		Object:    t.String(),
		Expected:  "in each admission cycle exactly one worker admits the workload, the manager's clusterName names it, and only it gets the remote job (with the prebuilt-workload-name label; a LeaderWorkerSet's copy, one for all its groups, with the manager's UID as its origin-uid annotation)",
		Problems:  problems,
		Timeline:  c.timeline(wl, jobs, c.foreignJobs(t, firstTime(wl, jobs))),
	}, t.refs(c)...)
}

func (c *Checker) judgeCycles(t target, cycles []cycle, wl, jobs []observe.Event) []string {
	var problems []string
	foreign := c.foreignJobs(t, firstTime(wl, jobs))
	t0 := firstTime(wl, jobs, foreign)
	for i, cy := range cycles {
		if c.Topo.Worker(cy.cluster) == nil {
			problems = append(problems, fmt.Sprintf("cluster %q: cycle %d: status.clusterName %q names no worker of the topology", c.Topo.Manager.Name, i+1, cy.cluster))
			continue
		}
		admitted := false
		for _, e := range wl {
			if e.Cluster == cy.cluster && e.Type == observe.Admitted && (cy.end.IsZero() || e.Time.Before(cy.end)) {
				admitted = true
			}
		}
		if !admitted {
			problems = append(problems, fmt.Sprintf("cluster %q: cycle %d: the selected worker's copy of %s never held an admitted reservation", cy.cluster, i+1, t))
		}
		if p := c.foreignOnWinner(t, i, cy, jobs, foreign, t0); p != "" {
			problems = append(problems, p)
		}
		for _, e := range wl {
			if e.Cluster == c.Topo.Manager.Name || e.Cluster == cy.cluster {
				continue
			}
			if (e.Type == observe.QuotaReserved || e.Type == observe.Admitted) && e.Time.After(cy.start.Add(c.skew())) && (cy.end.IsZero() || e.Time.Before(cy.end)) {
				if cy.inferred {
					problems = append(problems, fmt.Sprintf("cluster %q: cycle %d: its copy of %s got %s at %s, after MultiKueue had placed it on %q (remote job created at %s%s) without the manager ever recording that placement (no status.clusterName): %s",
						e.Cluster, i+1, t, e.Type, rel(e.Time, t0), cy.cluster, rel(cy.start, t0), jobFate(jobs, cy.cluster, cy.start, t0), RedoneDispatch))
					continue
				}
				problems = append(problems, fmt.Sprintf("cluster %q: cycle %d: its copy of %s got %s at %s, after the manager had selected %q at %s",
					e.Cluster, i+1, t, e.Type, rel(e.Time, t0), cy.cluster, rel(cy.start, t0)))
			}
		}
	}
	for _, e := range jobs {
		if e.Type != observe.Created || e.Cluster == c.Topo.Manager.Name {
			continue
		}
		var in *cycle
		for i := range cycles {
			if cycles[i].contains(e.Time, c.skew()) {
				in = &cycles[i]
			}
		}
		switch {
		case in == nil:
			problems = append(problems, fmt.Sprintf("cluster %q: remote %s created at %s while no worker was selected", e.Cluster, t.jobRef(), rel(e.Time, t0)))
		case in.cluster != e.Cluster && in.inferred:
			problems = append(problems, fmt.Sprintf("cluster %q: remote %s created at %s after MultiKueue had placed it on %q (remote job created at %s%s) without the manager ever recording that placement (no status.clusterName): %s",
				e.Cluster, t.jobRef(), rel(e.Time, t0), in.cluster, rel(in.start, t0), jobFate(jobs, in.cluster, in.start, t0), RedonePlacement))
		case in.cluster != e.Cluster:
			problems = append(problems, fmt.Sprintf("cluster %q: remote %s created at %s while the workload was placed on %q", e.Cluster, t.jobRef(), rel(e.Time, t0), in.cluster))
		case observe.CopyServesWorkloads(t.jobKind):
			if got := e.Labels[observe.AnnotationOriginUID]; t.jobUID != "" && got != string(t.jobUID) {
				problems = append(problems, fmt.Sprintf("cluster %q: remote %s has %s=%q, want the manager's %q", e.Cluster, t.jobRef(), observe.AnnotationOriginUID, got, t.jobUID))
			}
		case e.Labels[observe.LabelPrebuiltWorkload] != t.workload:
			problems = append(problems, fmt.Sprintf("cluster %q: remote %s has %s=%q, want %q", e.Cluster, t.jobRef(), observe.LabelPrebuiltWorkload, e.Labels[observe.LabelPrebuiltWorkload], t.workload))
		}
	}
	return problems
}

// RedonePlacement ends an ExactlyOnceAdmitted problem where MultiKueue ran
// a job on a second worker because the manager never recorded the first
// placement: the patch that sets status.clusterName lost (Kueue v0.19.2
// under load, see placements), and the next reconcile, seeing no placement,
// converged on the copy admitted earliest and deleted the first worker's
// remote job — after it had started.
const RedonePlacement = "the placement was redone on another worker because its record was lost, so the job started on both"

// RedoneDispatch ends an ExactlyOnceAdmitted or LosersCleaned problem
// where MultiKueue, with no record of the placement it had made (the
// manager's status.clusterName never written: the patch lost, or Kueue
// stopped between creating the remote job and writing it), dispatched the
// workload again and another worker admitted (or kept) a copy. Whether the
// job also ran twice is told apart by RedonePlacement.
const RedoneDispatch = "the dispatch was redone because the placement's record was lost, so another worker admitted a copy"

// jobFate says what became of the remote job created on cluster at start:
// ", started at …, deleted at …" (empty parts left out).
func jobFate(jobs []observe.Event, cluster string, start, t0 time.Time) string {
	var out string
	for _, e := range jobs {
		if e.Cluster != cluster || e.Time.Before(start) {
			continue
		}
		switch e.Type {
		case observe.JobStarted:
			out += ", started at " + rel(e.Time, t0)
		case observe.Deleted:
			return out + ", deleted at " + rel(e.Time, t0)
		}
	}
	return out
}
