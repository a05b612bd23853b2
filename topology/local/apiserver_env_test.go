package local

import "testing"

func TestAPIServerEnv(t *testing.T) {
	if got := apiServerEnv(BigTopologyWorkers-1, nil); len(got) != 0 {
		t.Errorf("small topology: %v", got)
	}
	got := apiServerEnv(BigTopologyWorkers, []string{"GOMEMLIMIT=off"})
	if len(got) != 2 || got[0] != "GOMEMLIMIT="+BigTopologyAPIServerMemoryLimit || got[1] != "GOMEMLIMIT=off" {
		t.Errorf("big topology with the caller's override last: %v", got)
	}
}
