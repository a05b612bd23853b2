package assert

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// NominationCleared checks the manager Workload's status.nominatedClusterNames
// over its history:
//
//   - before each admission cycle, while the workload waited for dispatch,
//     the list was populated; with the AllAtOnce dispatcher its first value
//     named every worker whose MultiKueueCluster was Active at that moment
//     (for a group of a LeaderWorkerSet whose other group was already
//     placed, only that group's worker, as MultiKueue nominates it);
//   - from the moment status.clusterName is set until it is reset, the list is
//     empty;
//   - status.clusterName does not change within a cycle.
//
// It waits (as long as the topology progresses; see Checker.Timeout) until
// the manager selected a worker. It does not check which worker was chosen
// (ExactlyOnceAdmitted does) nor the rounds of the Incremental dispatcher.
func (c *Checker) NominationCleared(ctx context.Context, job client.Object) error {
	if ok, err := c.perGroup(ctx, "NominationCleared", job, c.NominationCleared); ok {
		return err
	}
	t, err := c.resolveFor(ctx, "NominationCleared", job)
	if err != nil {
		return err
	}
	mgr := c.Topo.Manager.Name
	waitErr := c.waitPlaced(ctx, t)
	wl, jobs := c.history(t)
	cycles, problems := cyclesOf(wl, mgr)
	if len(cycles) == 0 {
		cycles, _ = placements(wl, jobs, mgr) // the placement the manager never recorded
	}
	if waitErr != nil {
		problems = append(problems, c.waited(ctx, t, waitErr)...)
	}
	t0 := firstTime(wl)
	var nominated []string
	type firstNomination struct {
		at     time.Time
		values []string
	}
	pendingSeen := map[int]firstNomination{} // cycle index -> first non-empty nomination before it
	stale := false                           // nominations seen together with a clusterName
	cur := 0
	for _, e := range wl {
		if e.Cluster != mgr {
			continue
		}
		// Which cycle is this event before or in?
		for cur < len(cycles) && !cycles[cur].end.IsZero() && !e.Time.Before(cycles[cur].end) {
			cur++
		}
		inCycle := cur < len(cycles) && !e.Time.Before(cycles[cur].start)
		switch e.Type {
		case observe.Nominated:
			nominated = e.Values
			if len(nominated) == 0 {
				continue
			}
			if inCycle && !cycles[cur].inferred {
				stale = true
				problems = append(problems, fmt.Sprintf("cluster %q: nominatedClusterNames became [%s] at %s while clusterName was %q",
					mgr, strings.Join(nominated, ","), rel(e.Time, t0), cycles[cur].cluster))
			} else if _, ok := pendingSeen[cur]; !ok {
				pendingSeen[cur] = firstNomination{at: e.Time, values: slices.Clone(nominated)}
			}
		case observe.ClusterNameSet:
			if e.ClusterName() != "" && len(nominated) > 0 {
				stale = true
				problems = append(problems, fmt.Sprintf("cluster %q: clusterName was set to %q at %s while nominatedClusterNames was still [%s]",
					mgr, e.Values[0], rel(e.Time, t0), strings.Join(nominated, ",")))
			}
		}
	}
	for i, cy := range cycles {
		first, ok := pendingSeen[i]
		if !ok {
			problems = append(problems, fmt.Sprintf("cluster %q: cycle %d: clusterName was set to %q at %s but nominatedClusterNames was never populated before",
				mgr, i+1, cy.cluster, rel(cy.start, t0)))
			continue
		}
		if c.Topo.Spec.Kueue.Dispatcher == topology.DispatcherAllAtOnce {
			got := slices.Clone(first.values)
			slices.Sort(got)
			want := c.activeWorkersAt(first.at)
			if sib := c.siblingCluster(ctx, t, first.at); sib != "" {
				// MultiKueue nominates, whatever the dispatcher, only the
				// worker a sibling component Workload (another group of a
				// LeaderWorkerSet) is placed on: one copy serves them all.
				want = []string{sib}
			}
			if !slices.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("cluster %q: cycle %d: AllAtOnce nominated [%s] at %s, want every Active worker [%s]%s",
					mgr, i+1, strings.Join(got, ","), rel(first.at, t0), strings.Join(want, ","), c.assumed(topology.FactDispatcher)))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	if stale && c.Topo.Facts.NominationPolicyNote != "" {
		// Who could have cleared them: Kueue's own write, and from v0.19.2
		// the chart's MutatingAdmissionPolicy where it is installed.
		f := c.Topo.Facts
		switch {
		case f.NominationPolicy != "":
			problems = append(problems, fmt.Sprintf("cluster %q: MutatingAdmissionPolicy %s, which clears nominations on admission and eviction, is installed and they stayed", mgr, f.NominationPolicy))
		case f.NominationPolicyRead:
			problems = append(problems, fmt.Sprintf("cluster %q: only Kueue's placement write clears nominations here (%s; Kueue v0.19.2's chart installs one with enableMutatingAdmissionPolicy)", mgr, f.NominationPolicyNote))
		default:
			problems = append(problems, fmt.Sprintf("cluster %q: whether a policy clears nominations is unknown (%s)", mgr, f.NominationPolicyNote))
		}
	}
	return c.fail(ctx, &Failure{
		Assertion: "NominationCleared",
		Object:    t.String(),
		Expected:  "nominatedClusterNames populated while pending dispatch (all workers for AllAtOnce), empty once clusterName is set, clusterName fixed within a cycle",
		Problems:  problems,
		Timeline:  c.timeline(wl),
	}, t.refs(c)...)
}

// activeWorkersAt returns, sorted, the workers whose MultiKueueCluster was
// Active at t according to the recorded history.
func (c *Checker) activeWorkersAt(t time.Time) []string {
	var out []string
	for _, w := range c.Topo.Spec.WorkerNames {
		evs, _ := c.Obs.History(observe.KindMultiKueueCluster, "", w)
		active := false
		for _, e := range evs {
			if e.Time.After(t) {
				break
			}
			switch e.Type {
			case observe.ClusterActive:
				active = true
			case observe.ClusterInactive, observe.Deleted:
				active = false
			}
		}
		if active {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// waitPlaced waits until the manager Workload of t has a clusterName, or
// ended with a placement that placements infers from the workers.
func (c *Checker) waitPlaced(ctx context.Context, t target) error {
	mgr := c.Topo.Manager.Name
	return pollHistory(ctx, c, t, fmt.Sprintf("cluster %q: %s to get a status.clusterName", mgr, t), func() error {
		wl, jobs := c.history(t)
		if cy, _ := placements(wl, jobs, mgr); len(cy) == 0 {
			if err := neverPlaced(wl, mgr, t); err != nil {
				return err
			}
			return fmt.Errorf("no clusterName on %s yet", t)
		}
		return nil
	})
}

// neverPlaced stops a wait for a placement that can no longer come: the
// manager Workload finished or was deleted without ever getting a
// status.clusterName and no worker got a remote job or an admitted copy
// either (placements infers the placement when one did). nil while it may
// still come.
//
// A Workload admitted on the manager without any admission check state will
// never be placed either: MultiKueue's check did not apply to it. Kueue from
// v0.18 applies a ClusterQueue's admission checks by the flavors of the
// admission, and a Workload that requests no resources is assigned no
// flavor, so it gets no check (v0.17 gave a flavorless admission every
// check, kubernetes-sigs/kueue#10316) and is admitted, and runs, on the
// manager.
func neverPlaced(wl []observe.Event, mgr string, t target) error {
	// Kueue admits a Workload once every check that applies to it is Ready:
	// admitted with no check Ready by then (one observed update may carry
	// both), no check applied.
	var admitted time.Time
	for _, e := range wl {
		if e.Cluster == mgr && e.Type == observe.Admitted {
			admitted = e.Time
			break
		}
	}
	if !admitted.IsZero() {
		ready := false
		for _, e := range wl {
			if e.Cluster == mgr && e.Type == observe.CheckState && len(e.Values) == 2 && e.Values[1] == string(kueue.CheckStateReady) && !e.Time.After(admitted) {
				ready = true
			}
		}
		if !ready {
			return poll.Stop(fmt.Errorf("cluster %q: %s was admitted on the manager at %s without any admission check Ready: MultiKueue's check did not apply to it (Kueue v0.18+ gives a Workload that requests no resources no flavor, and so none of its ClusterQueue's checks), so it runs on the manager and is never dispatched",
				mgr, t, admitted.Format("15:04:05.000")))
		}
	}
	if end, ok := endedUnplaced(wl, mgr); ok {
		return poll.Stop(fmt.Errorf("cluster %q: %s ended at %s without ever getting a status.clusterName, and no worker got a remote job or admitted a copy",
			mgr, t, end.Format("15:04:05.000")))
	}
	return nil
}

// siblingCluster returns, for a component Workload (one of several Kueue
// made for one job object: a LeaderWorkerSet's groups, marked with
// AnnotationComponentIndex), the worker another of them was placed on by
// at, as the manager recorded it; "" for any other Workload, or when none
// was placed yet.
func (c *Checker) siblingCluster(ctx context.Context, t target, at time.Time) string {
	mgr := c.Topo.Manager.Name
	if t.jobUID == "" || !observe.CopyServesWorkloads(t.jobKind) {
		return ""
	}
	wls, err := observe.WorkloadsOf(ctx, c.reader(mgr), t.namespace, t.jobUID)
	if err != nil || len(wls) < 2 {
		return ""
	}
	for _, wl := range wls {
		if wl.Name == t.workload {
			if _, ok := wl.Annotations[observe.AnnotationComponentIndex]; !ok {
				return ""
			}
			continue
		}
		evs, _ := c.Obs.History(observe.KindWorkload, wl.Namespace, wl.Name)
		on := ""
		for _, e := range evs {
			if e.Cluster == mgr && e.Type == observe.ClusterNameSet && !e.Time.After(at.Add(c.skew())) {
				on = e.ClusterName()
			}
		}
		if on != "" {
			return on
		}
	}
	return ""
}
