//go:build linux

package scenario_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// gateKueue is the newest release where MultiKueueWaitForWorkloadAdmitted
// can be turned off: from v0.18 it is GA and locked on.
const gateKueue = "v0.17.1"

// TestWaitForWorkloadAdmittedGate runs the LoserCleanup scenario with
// MultiKueueWaitForWorkloadAdmitted on and off, on the Kueue v0.17.1 binary
// (the gate is Beta there; from v0.18 it is GA and locked on), each on a
// topology of its own, and checks that the Kueue ran with the gate asked for
// (as its published configuration says) and that the losing copies went as
// the gate says (admission held 3 s on the workers): on, none deleted before
// the winner was Admitted; off, some, and the same history judged as if the
// gate were on fails.
func TestWaitForWorkloadAdmittedGate(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("%s=%t", assert.GateWaitForWorkloadAdmitted, on), func(t *testing.T) {
			ctx := context.Background()
			topo, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 2, Kueue: topology.KueueOptions{
				FeatureGates: map[string]bool{assert.GateWaitForWorkloadAdmitted: on},
			}}, local.Options{Kueue: local.KueueOptions{Version: gateKueue}})
			facts, err := topology.ReadKueueFacts(ctx, topo.Manager, topo.Spec.Kueue.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			if got, set := facts.FeatureGates[assert.GateWaitForWorkloadAdmitted]; !set || got != on || facts.Version != gateKueue {
				t.Fatalf("the manager's Kueue %q runs with %s=%t (set: %t), want %s with %t", facts.Version, assert.GateWaitForWorkloadAdmitted, got, set, gateKueue, on)
			}
			res, _ := scenario.For(t, env).LoserCleanup(ctx, scenario.LoserCleanupOptions{
				Dispatch:      scenario.DispatchOptions{Jobs: 3},
				HoldAdmission: 3 * time.Second,
			})
			t.Logf("gate %t: %d losing copies, %d deleted before the winner was Admitted (scenario says gate %t)", on, res.Losers, res.BeforeAdmitted, res.WaitForWorkloadAdmitted)
			if res.WaitForWorkloadAdmitted != on {
				t.Errorf("the scenario judged with the gate %t, want %t", res.WaitForWorkloadAdmitted, on)
			}
			if on && res.BeforeAdmitted != 0 || !on && res.BeforeAdmitted == 0 {
				t.Errorf("gate %t: %d losing copies deleted before the winner was Admitted", on, res.BeforeAdmitted)
			}
			if on {
				return
			}
			// With the gate off, the same history judged as if it were on
			// must fail: the losers went before the winner was Admitted.
			spec := topo.Spec
			spec.Kueue.FeatureGates = map[string]bool{assert.GateWaitForWorkloadAdmitted: true}
			flipped := &topology.Topology{Manager: topo.Manager, Workers: topo.Workers, Spec: spec, ProviderName: topo.ProviderName}
			chk := assert.New(flipped, env.Obs)
			chk.Timeout = 10 * time.Second
			for _, o := range res.Objects {
				if err := chk.LosersCleaned(ctx, o); err != nil {
					t.Logf("judged with the gate on: %v", err)
					return
				}
			}
			t.Errorf("gate off: LosersCleaned judged as if the gate were on did not fail")
		})
	}
}
