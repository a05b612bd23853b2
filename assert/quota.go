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
	mgr := c.Topo.Manager.Name
	for _, k := range keys {
		h := histories[k]
		held := false
		for _, e := range h {
			switch {
			case e.Cluster == mgr && e.Type == observe.QuotaReserved:
				held = true
			case e.Cluster == mgr && (e.Type == observe.QuotaReleased || e.Type == observe.Finished || e.Type == observe.Deleted):
				held = false
			case e.Cluster != mgr && e.Type == observe.Created && e.Labels[observe.LabelOrigin] != "" && !held && !e.Time.Before(c.Since):
				found = append(found, func(t0 time.Time) string {
					return fmt.Sprintf("cluster %q: Workload %s was dispatched at %s while it held no quota on the manager", e.Cluster, k, rel(e.Time, t0))
				})
				involvedKeys[k] = true
			}
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
