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

func TestEtcdModeShared(t *testing.T) {
	for _, c := range []struct {
		mode    EtcdMode
		workers int
		want    bool
	}{
		{EtcdAuto, BigTopologyWorkers - 1, false},
		{EtcdAuto, BigTopologyWorkers, true},
		{EtcdPerCluster, 19, false},
		{EtcdShared, 1, true},
	} {
		if got := c.mode.shared(c.workers); got != c.want {
			t.Errorf("%q with %d workers: shared = %v, want %v", c.mode, c.workers, got, c.want)
		}
	}
}
