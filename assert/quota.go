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
	for _, k := range keys {
		for _, d := range c.dispatchesWithoutQuota(ctx, histories[k]) {
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
		Object:    "every ClusterQueue on every cluster",
		Expected:  "admitted usage within each ClusterQueue's quota, as the cluster had it, at every moment; nothing dispatched without a reservation on the manager",
		Problems:  problems,
		Timeline:  c.timeline(involved),
	})
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

// dispatchesWithoutQuota returns the remote copies in one Workload's history
// h created on a worker while the manager held no reservation for it:
// between a QuotaReleased (Finished, Deleted) and the next QuotaReserved on
// the manager, or before the first. Events of different clusters are ordered
// by the Observer's receive times, which add each watch's delivery delay: a
// copy created right after a new reservation can be seen before it. So a
// copy that looks created without quota is judged again by the audit logs
// when the clusters have them: the time the worker's API server received the
// create against the times the manager's API server completed the writes
// that cleared and made the reservation. It is reported if that order, too,
// has it without quota, or if it could not be read (the problem says which).
func (c *Checker) dispatchesWithoutQuota(ctx context.Context, h []observe.Event) []dispatch {
	mgr := c.Topo.Manager.Name
	relevant := func(e observe.Event) (reserve, release, create bool) {
		switch {
		case e.Cluster == mgr && e.Type == observe.QuotaReserved:
			return true, false, false
		case e.Cluster == mgr && (e.Type == observe.QuotaReleased || e.Type == observe.Finished || e.Type == observe.Deleted):
			return false, true, false
		case e.Cluster != mgr && e.Type == observe.Created && e.Labels[observe.LabelOrigin] != "":
			return false, false, true
		}
		return false, false, false
	}
	// scan walks events in order, at(e) their time, and returns the copies
	// created while no reservation was held.
	scan := func(events []observe.Event, at func(observe.Event) time.Time) []dispatch {
		var out []dispatch
		held := false
		var released time.Time
		for i, e := range events {
			reserve, release, create := relevant(e)
			switch {
			case reserve:
				held = true
			case release:
				held, released = false, at(e)
			case create && !held && !e.Time.Before(c.Since):
				d := dispatch{create: e, received: at(e), released: released}
				for _, n := range events[i+1:] {
					if r, _, _ := relevant(n); r {
						d.reserved = at(n)
						break
					}
				}
				out = append(out, d)
			}
		}
		return out
	}
	found := scan(h, func(e observe.Event) time.Time { return e.Time })
	if len(found) == 0 {
		return nil
	}
	unread := func(why string) []dispatch {
		for i := range found {
			found[i].unread = why
		}
		return found
	}
	if !c.Obs.HasAudit() {
		return unread("no audit log to order them by")
	}
	attributed, err := c.Obs.Attribute(ctx, h)
	if err != nil {
		return unread(fmt.Sprintf("reading the audit logs: %v", err))
	}
	var events []observe.Event
	for _, e := range attributed {
		reserve, release, create := relevant(e)
		if !reserve && !release && !create {
			continue
		}
		if e.Actor.IsZero() {
			return unread(fmt.Sprintf("cluster %q: the write behind %s %s is not in its audit log", e.Cluster, e.Kind, e.Type))
		}
		events = append(events, e)
	}
	// A create counts from when its request arrived, a manager write from
	// when it was done.
	at := func(e observe.Event) time.Time {
		if e.Cluster == mgr {
			return e.Actor.Completed
		}
		return e.Actor.Received
	}
	slices.SortStableFunc(events, func(a, b observe.Event) int { return at(a).Compare(at(b)) })
	out := scan(events, at)
	for i := range out {
		out[i].audited = true
	}
	return out
}
