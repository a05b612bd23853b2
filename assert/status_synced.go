package assert

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
)

// StatusSynced checks that the manager's job status follows the remote job
// on the worker it ran on: once the remote job started, the manager's job
// shows a start; once it succeeded or failed, the manager's job reaches the
// same final state, with the same final status summary
// (observe.JobState.Summary: active / succeeded / failed counts for a Job,
// restarts and terminal state for a JobSet, deployment and job status for a
// RayJob). It waits (as long as the topology progresses; see
// Checker.Timeout) for both final states.
//
// That is liveness, not a service level: a manager that shows the final
// state late but right passes (MultiKueue's client to each worker is held to
// client-go's 5 requests per second, so under load the sync lags by tens of
// seconds; SyncLag reads the lag). Set SyncSLO to fail a lag over it.
//
// It does not compare intermediate counts, which MultiKueue may skip, and it
// does not ask for a start on the manager when the manager never recorded
// the placement (its Workload was never Admitted, so its job stayed
// suspended; PlacementRecorded judges that).
//
// For a kind whose status MultiKueue does not copy (a StatefulSet:
// observe.StatusNotCopied) it checks that the copy on the chosen worker
// runs and returns a Limitation that shows both sides' status. For a kind
// that never finishes but whose status MultiKueue copies (a RayCluster), it
// waits until the copy on the chosen worker has started and the manager's
// object shows the same status.
func (c *Checker) StatusSynced(ctx context.Context, job client.Object) error {
	t, err := c.resolveFor(ctx, "StatusSynced", job)
	if err != nil {
		return err
	}
	if why := observe.StatusNotCopied(t.jobKind); why != "" {
		return c.statusNotCopied(ctx, t, why)
	}
	if observe.NeverFinishes(t.jobKind) {
		return c.runningStatusSynced(ctx, t)
	}
	mgr := c.Topo.Manager.Name
	var remote string
	inferred := false // the manager never recorded the placement (PlacementRecorded judges that)
	waitErr := pollHistory(ctx, c, t, fmt.Sprintf("the manager %s to show the remote one's final state", t.jobRef()), func() error {
		last, jobs, err := c.lastPlacement(t)
		if err != nil {
			return err
		}
		remote, inferred = last.cluster, last.inferred
		rf, mf := finalOf(jobs, remote), finalOf(jobs, mgr)
		switch {
		case rf.typ == "" && finishedElsewhere(jobs, mgr, remote).cluster != "":
			return nil // the remote copy is gone, the manager ended from another
		case rf.typ == "":
			return fmt.Errorf("the remote %s on %q has not finished", t.jobKind, remote)
		case mf.typ == "":
			return fmt.Errorf("the manager %s is not %s yet", t.jobKind, rf.typ)
		}
		return nil
	})
	_, jobs := c.history(t)
	t0 := firstTime(jobs) // the timeline shows the job events
	var problems []string
	if remote != "" {
		rf, mf := finalOf(jobs, remote), finalOf(jobs, mgr)
		// A manager Workload that was never Admitted (its placement never
		// recorded) leaves the manager's job suspended, so it cannot show a
		// start; its final status is still judged.
		// MultiKueue copies a remote change after its events batch period
		// (1 s in cmd/kueue), and the manager's job reconciler unsuspends
		// the job on its own schedule: a remote run shorter than
		// startWindow can reach the manager as its end alone, a suspended
		// manager job finishing (seen on Kueue v0.19.2 with a 1 s JobSet).
		// A longer run must show its start.
		if hasEvent(jobs, remote, observe.JobStarted) && !hasEvent(jobs, mgr, observe.JobStarted) && !inferred && ranFor(jobs, remote, rf) >= startWindow {
			why := ""
			if !hasEvent(jobs, mgr, observe.JobUnsuspended) {
				why = " (it was never unsuspended on the manager)"
			}
			problems = append(problems, fmt.Sprintf("cluster %q: %s never showed a start though the remote %s on %q started%s", mgr, t.jobRef(), t.jobKind, remote, why))
		}
		switch {
		case rf.typ == "":
			if o := finishedElsewhere(jobs, mgr, remote); o.cluster != "" {
				problems = append(problems, fmt.Sprintf("cluster %q: the remote %s never finished: it was deleted at %s; the manager's %s ended %s at %s with the status of the copy on %q (ended %s at %s), a worker the manager had not selected last",
					remote, t.jobRef(), rel(o.deleted, t0), t.jobKind, o.manager.typ, rel(o.manager.at, t0), o.cluster, o.final.typ, rel(o.final.at, t0)))
				break
			}
			problems = append(problems, fmt.Sprintf("cluster %q: the remote %s never finished", remote, t.jobRef()))
		case mf.typ == "":
			problems = append(problems, fmt.Sprintf("cluster %q: %s never became %s; the remote %s on %q did at %s", mgr, t.jobRef(), rf.typ, t.jobKind, remote, rel(rf.at, t0)))
		default:
			if mf.typ != rf.typ {
				problems = append(problems, fmt.Sprintf("cluster %q: %s ended %s, the remote %s on %q ended %s", mgr, t.jobRef(), mf.typ, t.jobKind, remote, rf.typ))
			}
			if lag := mf.at.Sub(rf.at); c.SyncSLO > 0 && lag > c.SyncSLO {
				problems = append(problems, fmt.Sprintf("cluster %q: %s showed %s %s after the remote one, over the Checker's SyncSLO of %s (the status itself synced)", mgr, t.jobRef(), mf.typ, lag.Round(time.Millisecond), c.SyncSLO))
			}
			// The manager's final status must be the remote one's, either
			// its last or the one it had when it ended (see final.atEnd).
			if mf.status != rf.status && mf.status != rf.atEnd {
				end := ""
				if rf.atEnd != rf.status {
					end = fmt.Sprintf(" (%q when it ended)", rf.atEnd)
				}
				problems = append(problems, fmt.Sprintf("cluster %q: final status %q differs from the remote one's %q%s on %q", mgr, mf.status, rf.status, end, remote))
			}
		}
	}
	if waitErr != nil && len(problems) == 0 {
		problems = append(problems, c.waited(ctx, t, waitErr)...)
	}
	if len(problems) == 0 {
		return nil
	}
	return c.fail(ctx, &Failure{
		Assertion: "StatusSynced",
		Object:    t.jobRef(),
		Expected:  "the manager Job's status to follow the remote Job's and end identical",
		Problems:  problems,
		Timeline:  c.timeline(jobs),
	}, t.refs(c)...)
}

// SyncLag is how long after the remote job's final state (on the worker
// it last ran on) the manager's job showed its own, from the history; ok is
// false while the manager Workload or either final state is missing. It
// does not wait for them.
func (c *Checker) SyncLag(ctx context.Context, job client.Object) (lag time.Duration, ok bool) {
	short := *c
	short.Timeout = time.Second // the Workload is there after a run
	t, err := short.resolve(ctx, job)
	if err != nil {
		return 0, false
	}
	mgr := c.Topo.Manager.Name
	wl, jobs := c.history(t)
	cycles, _ := placements(wl, jobs, mgr)
	if len(cycles) == 0 {
		return 0, false
	}
	rf, mf := finalOf(jobs, cycles[len(cycles)-1].cluster), finalOf(jobs, mgr)
	if rf.typ == "" || mf.typ == "" {
		return 0, false
	}
	return mf.at.Sub(rf.at), true
}

// startWindow is the shortest remote run whose start the manager's job
// must show (see StatusSynced).
const startWindow = 5 * time.Second

// ranFor is how long the job ran on cluster: from its first start to its
// final state f (0 when either is missing).
func ranFor(jobs []observe.Event, cluster string, f final) time.Duration {
	for _, e := range jobs {
		if e.Cluster == cluster && e.Type == observe.JobStarted && !f.at.IsZero() {
			return f.at.Sub(e.Time)
		}
	}
	return 0
}

type final struct {
	typ    observe.Type
	at     time.Time
	status string
	// atEnd is the status when the job first reached its final state (with
	// the writes of that same moment): MultiKueue stops copying once the
	// manager's Workload is Finished, so a change the job's controller
	// makes after the end (a Kubeflow job's last replica counted after its
	// master succeeded) may never reach the manager.
	atEnd string
}

// finalOf returns the first final transition of the job on cluster and the
// last status it recorded before leaving: before its deletion was
// requested, when it was. What a job's controller writes while it tears the
// job down is not a status MultiKueue copies (the manager's Workload was
// finished before MultiKueue deleted the remote copy): an AppWrapper's
// controller turns its phase to Terminating and its conditions as it
// deletes the wrapped resources.
func finalOf(jobs []observe.Event, cluster string) final {
	var f final
	deleting := false
	for _, e := range jobs {
		if e.Cluster != cluster {
			continue
		}
		switch e.Type {
		case observe.JobSucceeded, observe.JobFailed:
			if f.typ == "" {
				f.typ, f.at = e.Type, e.Time
			}
		case observe.Created:
			deleting = false // a new object of the name
		case observe.DeletionRequested:
			deleting = true
		case observe.JobStatus:
			if !deleting {
				f.status = e.Detail
				if f.typ == "" || e.Time.Equal(f.at) {
					f.atEnd = e.Detail
				}
			}
		}
	}
	return f
}

// elsewhere is where a manager's job took its final state from when not
// from the worker selected last (see finishedElsewhere).
type elsewhere struct {
	cluster        string
	final, manager final
	deleted        time.Time // the selected worker's copy
}

// finishedElsewhere finds the cause when the copy on remote, the worker
// selected last, never finished: it was deleted, the manager's job ended,
// and its final state and status are those of another worker's copy, which
// ended before the manager's did. MultiKueue can finish the manager's
// Workload from a copy it no longer has selected (the earliest finished
// remote) and delete the others. The zero value when that is not what
// happened.
func finishedElsewhere(jobs []observe.Event, mgr, remote string) elsewhere {
	mf := finalOf(jobs, mgr)
	if mf.typ == "" || finalOf(jobs, remote).typ != "" {
		return elsewhere{}
	}
	var deleted time.Time
	clusters := map[string]bool{}
	for _, e := range jobs {
		switch {
		case e.Cluster == remote && e.Type == observe.Created:
			deleted = time.Time{}
		case e.Cluster == remote && e.Type == observe.Deleted:
			deleted = e.Time
		case e.Cluster != remote && e.Cluster != mgr:
			clusters[e.Cluster] = true
		}
	}
	if deleted.IsZero() {
		return elsewhere{}
	}
	for _, cl := range slices.Sorted(maps.Keys(clusters)) {
		f := finalOf(jobs, cl)
		if f.typ == mf.typ && !f.at.After(mf.at) && (mf.status == f.status || mf.status == f.atEnd) {
			return elsewhere{cluster: cl, final: f, manager: mf, deleted: deleted}
		}
	}
	return elsewhere{}
}

// lastPlacement is t's last placement cycle and its job events; an error
// says why there is none (yet).
func (c *Checker) lastPlacement(t target) (cycle, []observe.Event, error) {
	mgr := c.Topo.Manager.Name
	wl, jobs := c.history(t)
	cycles, _ := placements(wl, jobs, mgr)
	if len(cycles) == 0 {
		if err := neverPlaced(wl, mgr, t); err != nil {
			return cycle{}, jobs, err
		}
		return cycle{}, jobs, fmt.Errorf("%s is not placed yet", t)
	}
	return cycles[len(cycles)-1], jobs, nil
}

// runningStatusSynced is StatusSynced for a kind that never finishes and
// whose status MultiKueue copies: the copy on the chosen worker must start
// and the manager's object must come to show the status the copy shows.
func (c *Checker) runningStatusSynced(ctx context.Context, t target) error {
	mgr := c.Topo.Manager.Name
	var remote, rs, ms string
	err := pollHistory(ctx, c, t, fmt.Sprintf("the manager %s to show the running remote one's status", t.jobRef()), func() error {
		last, jobs, err := c.lastPlacement(t)
		if err != nil {
			return err
		}
		remote = last.cluster
		if !hasEvent(jobs, remote, observe.JobStarted) {
			return fmt.Errorf("the remote %s on %q has not started", t.jobKind, remote)
		}
		rs, ms = lastDetail(jobs, remote, observe.JobStatus), lastDetail(jobs, mgr, observe.JobStatus)
		if ms != rs {
			return fmt.Errorf("the manager's status %q is not the remote one's %q yet", ms, rs)
		}
		return nil
	})
	if err == nil {
		return nil
	}
	wl, jobs := c.history(t)
	var problems []string
	switch {
	case remote == "" || !hasEvent(jobs, remote, observe.JobStarted):
		problems = c.waited(ctx, t, err)
	default:
		problems = []string{fmt.Sprintf("cluster %q: %s shows status %q; the running remote %s on %q shows %q", mgr, t.jobRef(), ms, t.jobKind, remote, rs)}
	}
	return c.fail(ctx, &Failure{
		Assertion: "StatusSynced",
		Object:    t.jobRef(),
		Expected:  fmt.Sprintf("the manager %s's status to follow the running remote one's (a %s never finishes)", t.jobKind, t.jobKind),
		Problems:  problems,
		Timeline:  c.timeline(wl, jobs),
	}, t.refs(c)...)
}
