package assert

import (
	"fmt"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
)

// DefaultSkew is the allowance for the delivery skew between the informers of
// different clusters when events of two clusters are compared in time.
const DefaultSkew = 250 * time.Millisecond

// cycle is one admission cycle of a manager Workload: from the moment its
// status.clusterName names a worker until it is reset (eviction, re-dispatch)
// or, for the open cycle, until now.
type cycle struct {
	cluster string
	start   time.Time
	end     time.Time // zero while open
	// inferred: the manager never named the worker; the cycle was read
	// from the workers (see placements).
	inferred bool
}

func (c cycle) contains(t time.Time, skew time.Duration) bool {
	return !t.Before(c.start.Add(-skew)) && (c.end.IsZero() || t.Before(c.end.Add(skew)))
}

// cyclesOf splits the manager's Workload events into admission cycles and
// returns problems found on the way (a clusterName that changes within a
// cycle, which Kueue's CEL rules forbid).
func cyclesOf(events []observe.Event, manager string) ([]cycle, []string) {
	var out []cycle
	var problems []string
	open := -1
	for _, e := range events {
		if e.Cluster != manager || e.Kind != observe.KindWorkload {
			continue
		}
		switch e.Type {
		case observe.ClusterNameSet:
			v := e.ClusterName()
			switch {
			case v == "" && open >= 0:
				out[open].end, open = e.Time, -1
			case v != "" && open >= 0 && out[open].cluster != v:
				problems = append(problems, fmt.Sprintf("cluster %q: status.clusterName changed from %q to %q at %s without being reset",
					manager, out[open].cluster, v, e.Time.Format("15:04:05.000")))
				out[open].end = e.Time
				out = append(out, cycle{cluster: v, start: e.Time})
				open = len(out) - 1
			case v != "" && open < 0:
				out = append(out, cycle{cluster: v, start: e.Time})
				open = len(out) - 1
			}
		case observe.Evicted, observe.Deleted:
			if open >= 0 {
				out[open].end, open = e.Time, -1
			}
		}
	}
	return out, problems
}

// placements returns the admission cycles of a workload's history: those
// the manager's status.clusterName records (cyclesOf), anchored to the remote
// jobs (anchorCycles); or, when the manager Workload finished or was deleted
// without ever naming a worker, one inferred cycle read from the workers:
// from the creation of the first MultiKueue remote job (else the first
// remote copy's admission) to the manager's end. Kueue v0.19.2 does that to
// short jobs under load: MultiKueue's patch that sets clusterName loses an
// update conflict (or waits in the queue), the remote job finishes, and the
// next reconcile takes the "remote finished" branch, which finishes the
// manager Workload without recording the placement. The exactly-once, loser
// and status checks then judge what the workers did; PlacementRecorded
// judges the missing record.
func placements(wl, jobs []observe.Event, manager string) ([]cycle, []string) {
	cycles, problems := cyclesOf(wl, manager)
	if len(cycles) > 0 {
		anchorCycles(cycles, jobs)
		return cycles, problems
	}
	end, ok := endedUnplaced(wl, manager)
	if !ok {
		return nil, problems
	}
	first := func(events []observe.Event, typ observe.Type) *observe.Event {
		for i, e := range events {
			if e.Cluster != manager && e.Type == typ && !e.Time.After(end) {
				return &events[i]
			}
		}
		return nil
	}
	e := first(jobs, observe.Created)
	if e == nil {
		e = first(wl, observe.Admitted)
	}
	if e == nil {
		return nil, problems
	}
	return []cycle{{cluster: e.Cluster, start: e.Time, end: end, inferred: true}}, problems
}

// endedUnplaced returns when the manager Workload finished or was deleted,
// if it did so without a status.clusterName ever recorded.
func endedUnplaced(wl []observe.Event, manager string) (time.Time, bool) {
	for _, e := range wl {
		if e.Cluster != manager {
			continue
		}
		switch e.Type {
		case observe.ClusterNameSet:
			if e.ClusterName() != "" {
				return time.Time{}, false
			}
		case observe.Finished, observe.Deleted:
			return e.Time, true
		}
	}
	return time.Time{}, false
}

// anchorCycles moves each cycle's start back to the moment the remote job
// appeared on the selected worker, when that came first: MultiKueue creates
// the remote job before its status update of the manager Workload lands, so
// the selection happened by then. Only a job still there when the manager
// named the worker anchors the cycle: one created and deleted again before
// (Kueue v0.17.0 can dispatch while an eviction is under way and then remove
// that job) belongs to no cycle, and moving the start back to it would judge
// the copies made in between as made after the selection.
func anchorCycles(cycles []cycle, jobs []observe.Event) {
	var lower time.Time
	for i := range cycles {
		for _, e := range jobs {
			if e.Type == observe.Created && e.Cluster == cycles[i].cluster && e.Time.After(lower) && e.Time.Before(cycles[i].start) &&
				!deletedBetween(jobs, e, cycles[i].start) {
				cycles[i].start = e.Time
				break
			}
		}
		lower = cycles[i].end
		if lower.IsZero() {
			lower = cycles[i].start
		}
	}
}

// deletedBetween reports whether the object created by created (same cluster
// and UID) was deleted before until.
func deletedBetween(events []observe.Event, created observe.Event, until time.Time) bool {
	for _, e := range events {
		if e.Type == observe.Deleted && e.Cluster == created.Cluster && e.UID == created.UID &&
			!e.Time.Before(created.Time) && e.Time.Before(until) {
			return true
		}
	}
	return false
}

func hasEvent(events []observe.Event, cluster string, t observe.Type) bool {
	for _, e := range events {
		if e.Cluster == cluster && e.Type == t {
			return true
		}
	}
	return false
}

func rel(t, t0 time.Time) string {
	d := t.Sub(t0).Round(time.Millisecond)
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

func firstTime(events ...[]observe.Event) time.Time {
	var t0 time.Time
	for _, evs := range events {
		for _, e := range evs {
			if t0.IsZero() || e.Time.Before(t0) {
				t0 = e.Time
			}
		}
	}
	return t0
}
