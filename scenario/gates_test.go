//go:build linux

package scenario_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/kueue/pkg/features"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// gateEnv selects the gate set of a child run of
// TestWaitForWorkloadAdmittedGateChild: "true" or "false" for
// MultiKueueWaitForWorkloadAdmitted.
const gateEnv = "MKTK_TEST_GATE_WAIT_FOR_ADMITTED"

// gateReport is the line a child prints: the gate the topology was given,
// the gate the in-process Kueue read, and the loser counts.
var gateReport = regexp.MustCompile(`gate-report: spec=(true|false) kueue=(true|false) losers=(\d+) beforeAdmitted=(\d+) flippedFails=(true|false)`)

// TestWaitForWorkloadAdmittedGate runs the LoserCleanup scenario with
// MultiKueueWaitForWorkloadAdmitted on and off, on the in-process Kueue
// (v0.17.0, where the gate is Beta: from v0.18 it is GA and locked on). Feature gates are
// process-global in Go, so each gate set runs in a process of its own: this
// test re-executes its binary with -test.run for the child test and the gate
// in $MKTK_TEST_GATE_WAIT_FOR_ADMITTED, and checks that both children pass
// and report that the in-process Kueue ran with the gate they asked for and
// that the losing copies went as the gate says (admission held 3 s on the
// workers): on, none deleted before the winner was Admitted; off, some.
func TestWaitForWorkloadAdmittedGate(t *testing.T) {
	if os.Getenv(gateEnv) != "" {
		t.Skip("in a child run")
	}
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("%s=%t", assert.GateWaitForWorkloadAdmitted, on), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			start := time.Now()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWaitForWorkloadAdmittedGateChild$", "-test.v", "-test.count=1", "-test.timeout=9m")
			cmd.Env = append(os.Environ(), gateEnv+"="+strconv.FormatBool(on))
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive this test
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child with %s=%t failed (%v) after %s:\n%s", assert.GateWaitForWorkloadAdmitted, on, err, time.Since(start).Round(time.Millisecond), out)
			}
			m := gateReport.FindSubmatch(out)
			if m == nil {
				t.Fatalf("child printed no gate report:\n%s", out)
			}
			t.Logf("child passed in %s: %s", time.Since(start).Round(time.Millisecond), m[0])
			want := strconv.FormatBool(on)
			if string(m[1]) != want || string(m[2]) != want {
				t.Errorf("child ran with spec=%s kueue=%s, want %s for both", m[1], m[2], want)
			}
			before, _ := strconv.Atoi(string(m[4]))
			if on && before != 0 || !on && before == 0 {
				t.Errorf("gate %t: %s losing copies deleted before the winner was Admitted", on, m[4])
			}
			if !on && string(m[5]) != "true" {
				t.Errorf("gate off: LosersCleaned judged as if the gate were on did not fail")
			}
		})
	}
}

// TestWaitForWorkloadAdmittedGateChild is one gate set of
// TestWaitForWorkloadAdmittedGate; it runs only in a child process.
func TestWaitForWorkloadAdmittedGateChild(t *testing.T) {
	v := os.Getenv(gateEnv)
	if v == "" {
		t.Skip("run by TestWaitForWorkloadAdmittedGate in a process of its own")
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		t.Fatalf("%s=%q is not a boolean", gateEnv, v)
	}
	ctx := context.Background()
	// In-process (the pinned v0.17.0): from v0.18 the gate is GA and locked
	// on, so a Kueue binary of the default release refuses it off.
	topo, env := startObserved(ctx, t, topology.Options{Workers: 2, Kueue: topology.KueueOptions{
		FeatureGates: map[string]bool{assert.GateWaitForWorkloadAdmitted: on},
	}}, local.Options{Kueue: local.KueueOptions{InProcess: true}})
	res, _ := scenario.For(t, env).LoserCleanup(ctx, scenario.LoserCleanupOptions{
		Dispatch:      scenario.DispatchOptions{Jobs: 3},
		HoldAdmission: 3 * time.Second,
	})
	// With the gate off, the same history judged as if it were on must fail:
	// the losers went before the winner was Admitted.
	flippedFails := false
	if !on {
		spec := topo.Spec
		spec.Kueue.FeatureGates = map[string]bool{assert.GateWaitForWorkloadAdmitted: true}
		flipped := &topology.Topology{Manager: topo.Manager, Workers: topo.Workers, Spec: spec, ProviderName: topo.ProviderName}
		chk := assert.New(flipped, env.Obs)
		chk.Timeout = 10 * time.Second
		for _, o := range res.Objects {
			if err := chk.LosersCleaned(ctx, o); err != nil {
				flippedFails = true
				t.Logf("judged with the gate on: %v", err)
				break
			}
		}
	}
	fmt.Printf("gate-report: spec=%t kueue=%t losers=%d beforeAdmitted=%d flippedFails=%t\n",
		res.WaitForWorkloadAdmitted, features.Enabled(features.MultiKueueWaitForWorkloadAdmitted), res.Losers, res.BeforeAdmitted, flippedFails)
}
