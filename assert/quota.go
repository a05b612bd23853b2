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
// the usage admitted to the topology's ClusterQueue (the sum of
// status.admission resource usage of the Workloads holding a reservation
// there) never exceeded that cluster's quota, and that no workload was
// dispatched to a worker (a remote copy created) while it held no reservation
// on the manager: workloads beyond the manager's quota stay pending there.
//
// A reservation counts from QuotaReserved until QuotaReleased, Finished or
// deletion, as Kueue's cache counts it: an Evicted workload holds its quota
// until the reservation is cleared. Violations before Checker.Since are not reported.
// Quota borrowed through cohorts is not modelled: the topology's
// ClusterQueues have none. It does not wait.
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
	for _, cl := range c.Topo.Clusters() {
		ps, ks := c.overQuota(cl.Name, keys, histories)
		found = append(found, ps...)
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
	var involved []observe.Event
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
		Object:    fmt.Sprintf("ClusterQueue %s on every cluster", c.Topo.Spec.Queues.ClusterQueue),
		Expected:  "admitted usage within each cluster's quota at every moment; nothing dispatched without a reservation on the manager",
		Problems:  problems,
		Timeline:  c.timeline(involved),
	})
}

// overQuota sweeps the reservations on cluster and reports each resource
// whose admitted usage went over the quota, with the workloads holding it.
func (c *Checker) overQuota(cluster string, keys []client.ObjectKey, histories map[client.ObjectKey][]observe.Event) ([]func(time.Time) string, []client.ObjectKey) {
	type point struct {
		at    time.Time
		start bool
		key   client.ObjectKey
		usage corev1.ResourceList
	}
	var points []point
	for _, k := range keys {
		var open *point
		for _, e := range histories[k] {
			if e.Cluster != cluster {
				continue
			}
			switch e.Type {
			case observe.QuotaReserved:
				if e.Queue == c.Topo.Spec.Queues.ClusterQueue && open == nil {
					open = &point{at: e.Time, start: true, key: k, usage: e.Usage}
					points = append(points, *open)
				}
			case observe.QuotaReleased, observe.Finished, observe.Deleted:
				if open != nil {
					points = append(points, point{at: e.Time, key: k, usage: open.usage})
					open = nil
				}
			}
		}
	}
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
	quota := c.Topo.Spec.Quotas[cluster]
	used := corev1.ResourceList{}
	holders := map[client.ObjectKey]bool{}
	reported := map[corev1.ResourceName]bool{}
	var problems []func(time.Time) string
	var involved []client.ObjectKey
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
		for n, limit := range quota {
			u := used[n]
			if u.Cmp(limit) <= 0 || reported[n] || p.at.Before(c.Since) {
				continue
			}
			reported[n] = true
			var names []string
			for k := range holders {
				names = append(names, k.String())
				involved = append(involved, k)
			}
			slices.Sort(names)
			at, used, limit, n := p.at, u.String(), limit.String(), n
			problems = append(problems, func(t0 time.Time) string {
				return fmt.Sprintf("cluster %q: ClusterQueue %s admitted %s %s at %s, over its quota of %s, held by %s",
					cluster, c.Topo.Spec.Queues.ClusterQueue, used, n, rel(at, t0), limit, strings.Join(names, ", "))
			})
		}
	}
	return problems, involved
}
