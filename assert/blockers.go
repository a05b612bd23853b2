package assert

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// maxRefusalsShown bounds the refused writes a failure lists per cluster.
const maxRefusalsShown = 3

// waited turns a wait for t that timed out into problems: the time-out, then
// what the recorded history and the audit logs show holding t back (see
// blockers), or that they show nothing.
func (c *Checker) waited(ctx context.Context, t target, waitErr error) []string {
	out := []string{waitErr.Error()}
	bs := c.blockers(ctx, t)
	if len(bs) == 0 {
		return append(out, "what holds it: nothing in the recorded history or the audit logs says")
	}
	for _, b := range bs {
		out = append(out, "what holds it: "+b)
	}
	return out
}

// blockers says what the history and the clusters' audit logs show that can
// keep t from being placed, copied, finished or synced: a worker's own job
// object of t's name (not MultiKueue's), writes to t's objects that an API
// server refused (who refused and its answer; a cluster without an audit log
// is named as one where refusals cannot be seen), an Inactive
// MultiKueueCluster, and a manager admission check on t in Retry or Rejected.
func (c *Checker) blockers(ctx context.Context, t target) []string {
	wl, jobs := c.history(t)
	t0 := firstTime(wl, jobs)
	var out []string
	for _, s := range spans(c.foreignJobs(t, time.Time{})) {
		if s.deleted.IsZero() {
			out = append(out, fmt.Sprintf("cluster %q holds its own %s (UID %s, seen since %s), not MultiKueue's (no %s label)",
				s.cluster, t.jobRef(), s.uid, rel(s.created, t0), observe.LabelOrigin))
		}
	}
	clusters := append([]string{c.Topo.Manager.Name}, c.workerNames()...)
	var unseen []string
	for _, cl := range clusters {
		refused, readable, err := c.Obs.Refused(ctx, cl, t0)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("cluster %q: its audit log could not be read (%v): writes it refused cannot be seen", cl, err))
			continue
		case !readable:
			unseen = append(unseen, cl)
			continue
		}
		var mine []topology.AuditWrite
		for _, w := range refused {
			if w.Namespace == t.namespace && (w.Name == t.job || w.Name == t.workload) {
				mine = append(mine, w)
			}
		}
		if len(mine) == 0 {
			continue
		}
		shown := mine[max(0, len(mine)-maxRefusalsShown):]
		var lines []string
		for _, w := range shown {
			verb := w.Verb
			if w.Subresource != "" {
				verb += " " + w.Subresource
			}
			lines = append(lines, fmt.Sprintf("%s %s %s/%s by %s at %s: %d, refused by %s: %s",
				verb, w.Resource, w.Namespace, w.Name, w.User, rel(w.Received, t0), w.Code, w.RefusedBy, w.Message))
		}
		out = append(out, fmt.Sprintf("cluster %q refused %d write(s) to %s's objects (the last %d): %s",
			cl, len(mine), t, len(shown), strings.Join(lines, "; ")))
	}
	if len(unseen) > 0 {
		out = append(out, fmt.Sprintf("clusters %s keep no audit log this library can read: writes they refused cannot be seen", strings.Join(unseen, ", ")))
	}
	for _, w := range c.workerNames() {
		evs, _ := c.Obs.History(observe.KindMultiKueueCluster, "", w)
		for i := len(evs) - 1; i >= 0; i-- {
			if e := evs[i]; e.Type == observe.ClusterActive || e.Type == observe.ClusterInactive {
				if e.Type == observe.ClusterInactive {
					out = append(out, fmt.Sprintf("cluster %q: MultiKueueCluster %s is Inactive since %s (%s)", c.Topo.Manager.Name, w, rel(e.Time, t0), e.Detail))
				}
				break
			}
		}
	}
	checks := map[string]string{}
	var names []string
	for _, e := range wl {
		if e.Cluster == c.Topo.Manager.Name && e.Type == observe.CheckState && len(e.Values) == 2 {
			if _, ok := checks[e.Values[0]]; !ok {
				names = append(names, e.Values[0])
			}
			checks[e.Values[0]] = e.Values[1]
		}
	}
	slices.Sort(names)
	for _, n := range names {
		// Pending is the wait itself; Retry and Rejected say why.
		if st := checks[n]; st != string(kueue.CheckStateReady) && st != string(kueue.CheckStatePending) {
			out = append(out, fmt.Sprintf("cluster %q: %s's admission check %s is %s", c.Topo.Manager.Name, t, n, st))
		}
	}
	return out
}

// workerNames is the topology's worker names, in order.
func (c *Checker) workerNames() []string {
	out := make([]string, 0, len(c.Topo.Workers))
	for _, w := range c.Topo.Workers {
		out = append(out, w.Name)
	}
	return out
}
