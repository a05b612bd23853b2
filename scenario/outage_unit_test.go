package scenario

import (
	"strings"
	"testing"
	"time"
)

func TestJudgeHold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	wlt, bound := 20*time.Second, 30*time.Second
	placed := t0
	stopped := t0.Add(2 * time.Second)
	for _, tc := range []struct {
		name    string
		d       Redispatch
		wantErr string
	}{
		{"held until workerLostTimeout after placement, then moved", Redispatch{Job: "Job default/a", Placed: placed, Released: placed.Add(21 * time.Second), Next: "w2"}, ""},
		{"released before workerLostTimeout", Redispatch{Job: "Job default/a", Placed: placed, Released: stopped.Add(time.Second), Next: "w2"}, "before workerLostTimeout (20s)"},
		{"released within the timestamp's second", Redispatch{Job: "Job default/a", Placed: placed, Released: placed.Add(wlt - 900*time.Millisecond), Next: "w2"}, ""},
		{"released more than a second early", Redispatch{Job: "Job default/a", Placed: placed, Released: placed.Add(wlt - 1500*time.Millisecond), Next: "w2"}, "before workerLostTimeout (20s)"},
		{"held far beyond", Redispatch{Job: "Job default/a", Placed: placed, Released: placed.Add(wlt + bound + time.Second), Next: "w2"}, "after the hold ended"},
		{"back on the lost worker", Redispatch{Job: "Job default/a", Placed: placed, Released: placed.Add(21 * time.Second), Next: "w1"}, "was not placed on another worker"},
		{"never released", Redispatch{Job: "Job default/a", Placed: placed}, "no placement on \"w1\" and release from it recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := judgeHold("WorkerOutage", tc.d, "w1", stopped, wlt, bound)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	// A worker lost long after the placement: the hold is already over, the
	// release may come right after the stop (and the bound counts from it).
	late := Redispatch{Job: "Job default/b", Placed: placed, Released: placed.Add(62 * time.Second), Next: "w3"}
	if err := judgeHold("WorkerOutage", late, "w1", placed.Add(60*time.Second), wlt, bound); err != nil {
		t.Errorf("late loss: %v", err)
	}
}
