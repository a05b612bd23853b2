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
// A reservation counts from QuotaReserved until QuotaReleased, Finished,
// Evicted or deletion. Violations before Checker.Since are not reported.
// Quota borrowed through cohorts is not modelled: the topology's
// ClusterQueues have none. It does not wait.
func (c *Checker) QuotaRespected(ctx context.Context) error {
	var problems []string
	keys := c.Obs.Objects(observe.KindWorkload)
	histories := make(map[client.ObjectKey][]observe.Event, len(keys))
	for _, k := range keys {
		histories[k], _ = c.Obs.History(observe.KindWorkload, k.Namespace, k.Name)
	}
	var t0 time.Time
	for _, h := range histories {
		if ft := firstTime(h); !ft.IsZero() && (t0.IsZero() || ft.Before(t0)) {
			t0 = ft
		}
	}
	var involved []observe.Event
	for _, cl := range c.Topo.Clusters() {
		ps, evs := c.overQuota(cl.Name, keys, histories, t0)
		problems = append(problems, ps...)
		involved = append(involved, evs...)
	}
	mgr := c.Topo.Manager.Name
	for _, k := range keys {
		h := histories[k]
		held := false
		for _, e := range h {
			switch {
			case e.Cluster == mgr && e.Type == observe.QuotaReserved:
				held = true
			case e.Cluster == mgr && (e.Type == observe.QuotaReleased || e.Type == observe.Evicted || e.Type == observe.Deleted):
				held = false
			case e.Cluster != mgr && e.Type == observe.Created && e.Labels[observe.LabelOrigin] != "" && !held && !e.Time.Before(c.Since):
				problems = append(problems, fmt.Sprintf("cluster %q: Workload %s was dispatched at %s while it held no quota on the manager", e.Cluster, k, rel(e.Time, t0)))
				involved = append(involved, h...)
			}
		}
	}
	if len(problems) == 0 {
		return nil
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
func (c *Checker) overQuota(cluster string, keys []client.ObjectKey, histories map[client.ObjectKey][]observe.Event, t0 time.Time) ([]string, []observe.Event) {
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
			case observe.QuotaReleased, observe.Finished, observe.Evicted, observe.Deleted:
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
	var problems []string
	var involved []observe.Event
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
				involved = append(involved, histories[k]...)
			}
			slices.Sort(names)
			problems = append(problems, fmt.Sprintf("cluster %q: ClusterQueue %s admitted %s %s at %s, over its quota of %s, held by %s",
				cluster, c.Topo.Spec.Queues.ClusterQueue, u.String(), n, rel(p.at, t0), limit.String(), strings.Join(names, ", ")))
		}
	}
	return problems, involved
}
