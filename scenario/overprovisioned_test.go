package scenario_test

import (
	"context"
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestWorkerOverProvisioned: a worker whose ClusterQueue admits 4 Jobs of
// 1 CPU and whose one KWOK Node holds 2. MultiKueue dispatches all 4, the
// worker admits them, 2 run and 2 stay Pending there, Unschedulable.
func TestWorkerOverProvisioned(t *testing.T) {
	ctx := context.Background()
	_, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 1}, local.Options{Nodes: &local.Nodes{CPU: "2", Memory: "8Gi"}})
	res, ok := scenario.For(t, env).WorkerOverProvisioned(ctx, scenario.WorkerOverProvisionedOptions{})
	if !ok {
		return
	}
	t.Logf("quota %v, Nodes %v; placements %v", res.QuotaSlots, res.NodeSlots, res.Placement)
	if len(res.Pending) != 2 {
		t.Errorf("pending %v, want 2 Jobs", res.Pending)
	}
	for job, why := range res.Pending {
		t.Logf("%s: Pending on its worker: %s", job, why)
		if !strings.Contains(why, "Insufficient cpu") {
			t.Errorf("%s: the scheduler's reason %q does not say the Node lacks CPU", job, why)
		}
	}
}

// TestWorkerOverProvisionedRefusesWorkersWithoutNodes: workers whose Nodes
// hold their quota (the default) cannot show it, and the scenario says so.
func TestWorkerOverProvisionedRefusesWorkersWithoutNodes(t *testing.T) {
	env := mixed.get(t)
	_, err := scenario.WorkerOverProvisioned(context.Background(), env, scenario.WorkerOverProvisionedOptions{Dispatch: scenario.DispatchOptions{NamePrefix: "overprov-refused"}})
	if err == nil {
		t.Fatal("WorkerOverProvisioned passed on workers without Nodes (or with Nodes that hold the quota)")
	}
	if msg := err.Error(); !strings.Contains(msg, "the scenario needs Nodes on every worker") && !strings.Contains(msg, "than its Nodes hold") {
		t.Errorf("the failure does not say why:\n%s", msg)
	}
}
