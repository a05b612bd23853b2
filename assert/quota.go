package assert

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
)

// QuotaRespected checks, from the recorded history, that on every cluster
// the usage admitted to each ClusterQueue (the sum of status.admission
// resource usage of the Workloads holding a reservation there) never exceeded
// that ClusterQueue's quota as the cluster had it at that moment (observed,
// not restated: see observe.QuotaLimit), and that no workload was dispatched
// to a worker (a remote copy created) while it held no reservation on the
// manager: workloads beyond the manager's quota stay pending there.
//
// A reservation counts from QuotaReserved until QuotaReleased, Finished or
// deletion, as Kueue's cache counts it: an Evicted workload holds its quota
// until the reservation is cleared. Violations before Checker.Since are not
// reported. Borrowing is bounded by nominal quota + borrowingLimit for a
// ClusterQueue in a cohort; a resource it may borrow without limit is not
// judged (its bound lives in the cohort, which is not modelled). Flavors are
// summed per resource. It does not wait.
func (c *Checker) QuotaRespected(ctx context.Context) error {
	// Problems are phrased once the events involved, and so the timeline's
	// start, are known: their times read against that timeline.
	var found []func(t0 time.Time) string
	keys := c.Obs.Objects(observe.KindWorkload)
	histories := make(map[client.ObjectKey][]observe.Event, len(keys))
	for _, k := range keys {
		histories[k], _ = c.Obs.History(observe.KindWorkload, k.Namespace, k.Name)
	}
	involvedKeys := map[client.ObjectKey]bool{}
	var quotaEvents []observe.Event
	for _, cl := range c.Topo.Clusters() {
		ps, ks, qs := c.overQuota(cl.Name, keys, histories)
		found = append(found, ps...)
		quotaEvents = append(quotaEvents, qs...)
		for _, k := range ks {
			involvedKeys[k] = true
		}
	}
	dispatched := c.dispatchesWithoutQuota(ctx, keys, histories)
	var dispatchedTo []string
	for _, k := range keys {
		for _, d := range dispatched[k] {
			dispatchedTo = append(dispatchedTo, d.create.Cluster)
			found = append(found, func(t0 time.Time) string {
				return fmt.Sprintf("cluster %q: Workload %s was dispatched at %s while it held no quota on the manager%s", d.create.Cluster, k, rel(d.create.Time, t0), d.why())
			})
			involvedKeys[k] = true
		}
	}
	if len(found) == 0 {
		return nil
	}
	involved := quotaEvents
	for _, k := range keys { // in key order, each history once
		if involvedKeys[k] {
			involved = append(involved, histories[k]...)
		}
	}
	t0 := firstTime(involved)
	problems := make([]string, len(found))
	for i, f := range found {
		problems[i] = f(t0)
	}
	return c.fail(ctx, &Failure{
		Assertion: "QuotaRespected",
		Object:    quotaObject(quotaEvents, dispatchedTo),
		Expected:  "admitted usage within each ClusterQueue's quota, as the cluster had it, at every moment; nothing dispatched without a reservation on the manager",
		Problems:  problems,
		Timeline:  c.timeline(involved),
	})
}

// quotaObject names what QuotaRespected found at fault: each ClusterQueue
// that went over its quota (from the quota events that set the limits
// broken) and the workers that received a dispatch without quota.
func quotaObject(quotaEvents []observe.Event, dispatchedTo []string) string {
	var parts []string
	seen := map[string]bool{}
	for _, e := range quotaEvents {
		p := fmt.Sprintf("ClusterQueue %s on %q", e.Name, e.Cluster)
		if !seen[p] {
			seen[p] = true
			parts = append(parts, p)
		}
	}
	slices.Sort(dispatchedTo)
	if to := slices.Compact(dispatchedTo); len(to) > 0 {
		q := make([]string, len(to))
		for i, c := range to {
			q[i] = fmt.Sprintf("%q", c)
		}
		parts = append(parts, "the dispatches to "+strings.Join(q, ", ")+" without quota on the manager")
	}
	if len(parts) == 0 {
		return "the ClusterQueues"
	}
	return strings.Join(parts, " and ")
}

// overQuota sweeps the reservations on cluster, queue by queue, and reports
// each resource whose admitted usage went over the queue's limit at that
// moment, with the workloads holding it. It returns the problems, the
// workloads involved and the quota events that set the limits broken.
func (c *Checker) overQuota(cluster string, keys []client.ObjectKey, histories map[client.ObjectKey][]observe.Event) ([]func(time.Time) string, []client.ObjectKey, []observe.Event) {
	type point struct {
		at    time.Time
		start bool
		key   client.ObjectKey
		usage corev1.ResourceList
	}
	byQueue := map[string][]point{}
	for _, k := range keys {
		var open *point
		openQueue := ""
		for _, e := range histories[k] {
			if e.Cluster != cluster {
				continue
			}
			switch e.Type {
			case observe.QuotaReserved:
				if open == nil && e.Queue != "" {
					open, openQueue = &point{at: e.Time, start: true, key: k, usage: e.Usage}, e.Queue
					byQueue[openQueue] = append(byQueue[openQueue], *open)
				}
			case observe.QuotaReleased, observe.Finished, observe.Deleted:
				if open != nil {
					byQueue[openQueue] = append(byQueue[openQueue], point{at: e.Time, key: k, usage: open.usage})
					open = nil
				}
			}
		}
	}
	queues := make([]string, 0, len(byQueue))
	for q := range byQueue {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	var problems []func(time.Time) string
	var involved []client.ObjectKey
	var quotaEvents []observe.Event
	for _, queue := range queues {
		points := byQueue[queue]
		slices.SortStableFunc(points, func(a, b point) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			if a.start == b.start {
				return 0
			}
			if !a.start {
				return -1 // releases first at equal times
			}
			return 1
		})
		limits := c.quotaHistory(cluster, queue)
		used := corev1.ResourceList{}
		holders := map[client.ObjectKey]bool{}
		reported := map[corev1.ResourceName]bool{}
		for _, p := range points {
			for n, q := range p.usage {
				cur := used[n]
				if p.start {
					cur.Add(q)
				} else {
					cur.Sub(q)
				}
				used[n] = cur
			}
			if p.start {
				holders[p.key] = true
			} else {
				delete(holders, p.key)
				continue
			}
			set, ok := limitAt(limits, p.at)
			if !ok || p.at.Before(c.Since) {
				continue // the queue's quota was never observed: nothing to judge against
			}
			for n, limit := range set.Usage {
				u := used[n]
				if u.Cmp(limit) <= 0 || reported[n] {
					continue
				}
				reported[n] = true
				if k := len(quotaEvents); k == 0 || !quotaEvents[k-1].Time.Equal(set.Time) || quotaEvents[k-1].Name != set.Name {
					quotaEvents = append(quotaEvents, set)
				}
				var names []string
				for k := range holders {
					names = append(names, k.String())
					involved = append(involved, k)
				}
				slices.Sort(names)
				at, used, limit, n, queue := p.at, u.String(), limit.String(), n, queue
				problems = append(problems, func(t0 time.Time) string {
					return fmt.Sprintf("cluster %q: ClusterQueue %s admitted %s %s at %s, over its quota of %s, held by %s",
						cluster, queue, used, n, rel(at, t0), limit, strings.Join(names, ", "))
				})
			}
		}
	}
	return problems, involved, quotaEvents
}

// quotaHistory returns the QuotaSet events of a ClusterQueue on a cluster,
// oldest first.
func (c *Checker) quotaHistory(cluster, queue string) []observe.Event {
	evs, _ := c.Obs.History(observe.KindClusterQueue, "", queue)
	out := evs[:0]
	for _, e := range evs {
		if e.Cluster == cluster && e.Type == observe.QuotaSet {
			out = append(out, e)
		}
	}
	return out
}

// limitAt is the quota in force at t: the last QuotaSet at or before t, or,
// when the reservation came before the Observer first saw the queue, the
// first one seen (quotas rarely change; the timeline shows which was used).
func limitAt(sets []observe.Event, t time.Time) (observe.Event, bool) {
	if len(sets) == 0 {
		return observe.Event{}, false
	}
	cur := sets[0]
	for _, s := range sets[1:] {
		if s.Time.After(t) {
			break
		}
		cur = s
	}
	return cur, true
}

// dispatch is a remote copy created while the manager held no quota for it.
type dispatch struct {
	create observe.Event
	// audited says the order was read from the API servers' audit logs:
	// received is when the worker's API server took the create, released
	// and reserved when the manager's reservation was last cleared before
	// it and next made after it (zero if never).
	audited                      bool
	received, released, reserved time.Time
	// unread says why the audit logs could not settle the order.
	unread string
}

// why says by which order the copy was judged. Audited times are given
// relative to each other, not to the timeline: the audit logs carry the API
// servers' wall clock, the timeline the Observer's monotonic one, and the two
// drift apart while time synchronisation slews or steps the wall clock (seen
// here: 0.5 ms per 100 ms for 15 s, and a 4.8 s step within one test).
func (d dispatch) why() string {
	if !d.audited {
		if d.unread != "" {
			return " (by the Observer's receive times: " + d.unread + ")"
		}
		return ""
	}
	s := " (by the audit logs: the worker's API server received the create"
	if !d.released.IsZero() {
		s += fmt.Sprintf(" %s after the manager's API server completed the write that released the reservation,", d.received.Sub(d.released).Round(time.Millisecond))
	}
	if d.reserved.IsZero() {
		return s + " and no reservation was made after it)"
	}
	return s + fmt.Sprintf(" %s before the write that made it again)", d.reserved.Sub(d.received).Round(time.Millisecond))
}

// quotaStep is what an event means for dispatchesWithoutQuota.
type quotaStep int

const (
	stepOther   quotaStep = iota
	stepReserve           // QuotaReserved on the manager
	stepRelease           // QuotaReleased, Finished or Deleted on the manager
	stepCreate            // a remote copy (origin label) created on a worker
)

func (c *Checker) quotaStepOf(e observe.Event) quotaStep {
	mgr := c.Topo.Manager.Name
	switch {
	case e.Cluster == mgr && e.Type == observe.QuotaReserved:
		return stepReserve
	case e.Cluster == mgr && (e.Type == observe.QuotaReleased || e.Type == observe.Finished || e.Type == observe.Deleted):
		return stepRelease
	case e.Cluster != mgr && e.Type == observe.Created && e.Labels[observe.LabelOrigin] != "":
		return stepCreate
	}
	return stepOther
}

// unheldCreates walks one Workload's events in order, at(e) their time, and
// returns the remote copies created while the manager held no reservation:
// between a release and the next reservation, or before the first.
func (c *Checker) unheldCreates(events []observe.Event, at func(observe.Event) time.Time) []dispatch {
	var out []dispatch
	held := false
	var released time.Time
	waiting := 0 // out[waiting:] still want the next reservation's time
	for _, e := range events {
		switch c.quotaStepOf(e) {
		case stepReserve:
			held = true
			for ; waiting < len(out); waiting++ {
				out[waiting].reserved = at(e)
			}
		case stepRelease:
			held, released = false, at(e)
		case stepCreate:
			if !held && !e.Time.Before(c.Since) {
				out = append(out, dispatch{create: e, received: at(e), released: released})
			}
		}
	}
	return out
}

// dispatchesWithoutQuota returns, per Workload, the remote copies created on
// a worker while the manager held no reservation for it (unheldCreates).
// Events of different clusters are ordered by the Observer's receive times,
// which add each watch's delivery delay: a copy created right after a new
// reservation can be seen before it. So the Workloads with a copy that looks
// created without quota are judged again by the audit logs, read once for
// all of them, when the clusters have them: the time the worker's API server
// received the create against the times the manager's API server completed
// the writes that cleared and made the reservation. A copy is reported if
// that order, too, has it without quota, or if the order could not be read
// (the problem says which).
func (c *Checker) dispatchesWithoutQuota(ctx context.Context, keys []client.ObjectKey, histories map[client.ObjectKey][]observe.Event) map[client.ObjectKey][]dispatch {
	found := map[client.ObjectKey][]dispatch{}
	var suspects []client.ObjectKey
	var all []observe.Event
	for _, k := range keys {
		if ds := c.unheldCreates(histories[k], func(e observe.Event) time.Time { return e.Time }); len(ds) > 0 {
			found[k] = ds
			suspects = append(suspects, k)
			all = append(all, histories[k]...)
		}
	}
	if len(suspects) == 0 {
		return nil
	}
	unread := func(k client.ObjectKey, why string) {
		for i := range found[k] {
			found[k][i].unread = why
		}
	}
	if !c.Obs.HasAudit() {
		for _, k := range suspects {
			unread(k, "no audit log to order them by")
		}
		return found
	}
	attributed, err := c.Obs.Attribute(ctx, all)
	if err != nil {
		for _, k := range suspects {
			unread(k, fmt.Sprintf("reading the audit logs: %v", err))
		}
		return found
	}
	// A create counts from when its request arrived, a manager write from
	// when it was done.
	at := func(e observe.Event) time.Time {
		if e.Cluster == c.Topo.Manager.Name {
			return e.Actor.Completed
		}
		return e.Actor.Received
	}
	for _, k := range suspects { // Attribute keeps the order: each history in turn
		h := attributed[:len(histories[k])]
		attributed = attributed[len(histories[k]):]
		var events []observe.Event
		missing := ""
		for _, e := range h {
			if c.quotaStepOf(e) == stepOther {
				continue
			}
			if e.Actor.IsZero() {
				missing = fmt.Sprintf("cluster %q: the write behind %s %s is not in its audit log", e.Cluster, e.Kind, e.Type)
				break
			}
			events = append(events, e)
		}
		if missing != "" {
			unread(k, missing)
			continue
		}
		slices.SortStableFunc(events, func(a, b observe.Event) int { return at(a).Compare(at(b)) })
		ds := c.unheldCreates(events, at)
		for i := range ds {
			ds[i].audited = true
		}
		found[k] = ds
	}
	return found
}
