package assert

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
)

// IncrementalRoundSize is how many clusters the Incremental dispatcher adds
// per round in Kueue v0.17.0.
const IncrementalRoundSize = 3

// DispatchedIncrementally checks the nominations of the Incremental
// dispatcher (v0.17.0 behaviour) before each admission cycle: the successive
// values of nominatedClusterNames grow in rounds, round k naming the first
// 3k Active workers in name order (fewer when fewer are Active). It waits (up
// to Timeout) for the workload to be placed. It does not check the 5-minute
// round timeout, nor which worker won.
func (c *Checker) DispatchedIncrementally(ctx context.Context, job client.Object) error {
	t, err := c.resolveFor(ctx, "DispatchedIncrementally", job)
	if err != nil {
		return err
	}
	waitErr := c.waitPlaced(ctx, t)
	wl, _ := c.history(t)
	mgr := c.Topo.Manager.Name
	_, problems := cyclesOf(wl, mgr)
	if waitErr != nil {
		problems = append(problems, waitErr.Error())
	}
	t0 := firstTime(wl)
	placed, round := false, 0
	var active []string
	for _, e := range wl {
		if e.Cluster != mgr {
			continue
		}
		switch e.Type {
		case observe.ClusterNameSet:
			placed = e.ClusterName() != ""
			if !placed {
				round = 0 // re-dispatch: a new pending period
			}
		case observe.Evicted:
			placed, round = false, 0
		case observe.Nominated:
			if placed || len(e.Values) == 0 {
				continue
			}
			if round == 0 {
				active = c.activeWorkersAt(e.Time)
			}
			round++
			n := min(round*IncrementalRoundSize, len(active))
			want := slices.Clone(active[:n])
			got := slices.Clone(e.Values)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("cluster %q: round %d at %s nominated [%s], want the first %d Active workers by name [%s]",
					mgr, round, rel(e.Time, t0), strings.Join(got, ","), n, strings.Join(want, ",")))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return c.fail(ctx, &Failure{
		Assertion: "DispatchedIncrementally",
		Object:    t.String(),
		Expected:  fmt.Sprintf("nominations growing by at most %d clusters per round, in name order", IncrementalRoundSize),
		Problems:  problems,
		Timeline:  c.timeline(wl),
	}, t.refs(c)...)
}
