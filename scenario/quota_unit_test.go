package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
)

// history builds Workload events: each step is "cluster workload type" at
// one more millisecond.
func history(steps ...string) []observe.Event {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []observe.Event
	for i, s := range steps {
		f := strings.Fields(s)
		out = append(out, observe.Event{Time: t0.Add(time.Duration(i) * time.Millisecond), Cluster: f[0], Kind: observe.KindWorkload,
			Namespace: "default", Name: f[1], Type: observe.Type(f[2])})
	}
	return out
}

func TestJudgeProvisioning(t *testing.T) {
	// Manager fits 1, workers 2 (w1, w2 one each): b queues while a runs on w1.
	under := history(
		"manager a Created", "manager b Created",
		"manager a QuotaReserved",
		"w1 a Created", "w2 a Created", "w1 a QuotaReserved", "w2 a Deleted",
		"w1 a Finished", "manager a Finished",
		"manager b QuotaReserved", "w2 b Created", "w2 b QuotaReserved", "w2 b Finished", "manager b Finished",
	)
	// The same Workloads, but b reserved on the manager before a ran: nothing
	// queued while the manager was full.
	noQueue := history(
		"manager a Created", "manager a QuotaReserved", "w1 a Created", "w1 a QuotaReserved", "w1 a Finished", "manager a Finished",
		"manager b Created", "manager b QuotaReserved", "w2 b Created", "w2 b QuotaReserved", "w2 b Finished", "manager b Finished",
	)
	// Manager fits 3, workers 2: c is reserved with its copy pending while
	// a and b fill the workers.
	over := history(
		"manager a Created", "manager b Created", "manager c Created",
		"manager a QuotaReserved", "manager b QuotaReserved", "manager c QuotaReserved",
		"w1 a Created", "w1 a QuotaReserved", "w2 b Created", "w2 b QuotaReserved", "w1 c Created",
		"w1 a Finished", "manager a Finished", "w1 c QuotaReserved",
	)
	for _, tc := range []struct {
		name    string
		res     QuotaResult
		evs     []observe.Event
		wantErr string
	}{
		{"under: queued on the full manager, workers with room", QuotaResult{Provisioning: UnderProvisioned, ManagerSlots: 1, WorkerSlots: 2}, under, ""},
		{"under: nothing queued", QuotaResult{Provisioning: UnderProvisioned, ManagerSlots: 1, WorkerSlots: 2}, noQueue, "never saw Jobs queued on the full manager"},
		{"balanced: queued while full", QuotaResult{Provisioning: Balanced, ManagerSlots: 1, WorkerSlots: 1}, under, ""},
		{"over: a copy pending while the workers are full", QuotaResult{Provisioning: OverProvisioned, ManagerSlots: 3, WorkerSlots: 2}, over, ""},
		{"over: never more reserved than the workers fit", QuotaResult{Provisioning: OverProvisioned, ManagerSlots: 3, WorkerSlots: 2}, under, "never saw more Workloads reserved on the manager than the workers fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.res
			err := judgeProvisioning(&res, sweep(tc.evs, "manager"))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			case err == nil && res.Evidence == "":
				t.Error("no evidence recorded")
			}
		})
	}
	res := QuotaResult{Provisioning: UnderProvisioned, ManagerSlots: 1, WorkerSlots: 2}
	_ = judgeProvisioning(&res, sweep(under, "manager"))
	if res.PeakManagerReserved != 1 || res.PeakQueued != 2 || res.PeakRunning != 1 || res.PeakCopies != 1 || res.PeakStarved != 1 {
		t.Errorf("peaks: %+v", res)
	}
}
