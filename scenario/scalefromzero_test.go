package scenario_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestScaleFromZero plays a CAPZ MachinePool with min 0 on both workers: no
// Node at the start, 1-CPU Nodes added by the simulated autoscaler 2 s after
// pods are unschedulable. Every Job is dispatched exactly once, waits for a
// Node, runs and finishes; the waits are in the result.
func TestScaleFromZero(t *testing.T) {
	ctx := context.Background()
	_, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 2}, local.Options{Nodes: &local.Nodes{
		CPU: "1", Memory: "2Gi", Autoscaler: &local.Autoscaler{Max: 3, Delay: 2 * time.Second, IdleAfter: 5 * time.Second},
	}})
	res, ok := scenario.For(t, env).ScaleFromZero(ctx, scenario.ScaleFromZeroOptions{Dispatch: scenario.DispatchOptions{Jobs: 3}})
	if !ok {
		return
	}
	t.Logf("Nodes before %v, at most %v; placements %v", res.NodesBefore, res.NodesPeak, res.Placement)
	if len(res.FromZero) != 3 {
		t.Errorf("jobs from zero %v, want all 3", res.FromZero)
	}
	for job, wait := range res.NodeWait {
		t.Logf("%s: its pod waited %s for a Node", job, wait.Round(time.Millisecond))
		if wait < time.Second {
			t.Errorf("%s: its pod waited %s, less than the autoscaler's 2 s delay allows", job, wait)
		}
	}
}

// TestScaleFromZeroRefusesWorkersThatNeedNoNodes: on workers that have
// their Nodes already (no autoscaled pool at zero), there is nothing to
// scale, and the scenario says so instead of passing.
func TestScaleFromZeroRefusesWorkersThatNeedNoNodes(t *testing.T) {
	env := mixed.get(t)
	_, err := scenario.ScaleFromZero(context.Background(), env, scenario.ScaleFromZeroOptions{Dispatch: scenario.DispatchOptions{Jobs: 1, NamePrefix: "nozero"}})
	if err == nil {
		t.Fatal("ScaleFromZero passed on workers with no autoscaled Nodes")
	}
	msg := err.Error()
	if !strings.Contains(msg, "every worker has Nodes") {
		t.Errorf("the failure does not say that nothing scaled:\n%s", msg)
	}
}
