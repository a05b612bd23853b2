package report

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/multikueue-testkit/testkit/observe"
)

// Unit tests of the pure derivations; Scale's tests check them on real
// clusters.

func TestWorkloadTimings(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	origin := map[string]string{observe.LabelOrigin: "multikueue"}
	ev := func(ms int, cluster string, kind observe.Kind, typ observe.Type, uid types.UID, labels map[string]string, values ...string) observe.Event {
		return observe.Event{Time: at(ms), Cluster: cluster, Kind: kind, UID: uid, Type: typ, Labels: labels, Values: values}
	}
	wl := []observe.Event{
		ev(10, "manager", observe.KindWorkload, observe.Created, "m", nil),
		ev(60, "worker-1", observe.KindWorkload, observe.Created, "c1", origin),
		ev(65, "worker-2", observe.KindWorkload, observe.Created, "c2", origin),
		ev(80, "worker-2", observe.KindWorkload, observe.Admitted, "c2", origin),
		// A worker's own Workload of the same name: not a copy.
		ev(85, "worker-3", observe.KindWorkload, observe.Created, "own", nil),
		ev(90, "manager", observe.KindWorkload, observe.ClusterNameSet, "m", nil, "worker-2"),
		ev(130, "worker-1", observe.KindWorkload, observe.Deleted, "c1", origin),
	}
	job := []observe.Event{
		ev(0, "manager", observe.KindJob, observe.Created, "j", nil),
		ev(100, "worker-2", observe.KindJob, observe.Created, "rj", origin),
		ev(1200, "worker-2", observe.KindJob, observe.JobSucceeded, "rj", origin),
		ev(1235, "manager", observe.KindJob, observe.JobSucceeded, "j", nil),
	}
	got := workloadTimings("manager", wl, job, "j", "m")
	check := func(name string, p *float64, want float64) {
		t.Helper()
		if p == nil || *p != want {
			t.Errorf("%s = %v, want %v", name, p, want)
		}
	}
	if got.winner != "worker-2" || got.losers != 1 || got.outcome != "Succeeded" {
		t.Errorf("winner %q losers %d outcome %q, want worker-2, 1, Succeeded", got.winner, got.losers, got.outcome)
	}
	check("dispatch", got.dispatch, 80)
	check("remote admission", got.admit, 15)
	check("status-sync lag", got.syncLag, 35)
	check("loser cleanup", got.cleanup, 50)
	if got.loserCleanup["worker-1"] != 50 || len(got.loserCleanup) != 1 {
		t.Errorf("per-loser cleanup = %v, want worker-1: 50", got.loserCleanup)
	}

	// Look-alike: a losing copy never deleted leaves cleanup unknown, and
	// nothing admitted leaves dispatch unknown.
	got = workloadTimings("manager", wl[:6], job[:1], "j", "m")
	if got.cleanup != nil || got.dispatch == nil || got.syncLag != nil {
		t.Errorf("with the loser left and no finish: cleanup %v dispatch %v sync %v, want nil, set, nil", got.cleanup, got.dispatch, got.syncLag)
	}
	got = workloadTimings("manager", wl[:3], job[:1], "j", "m")
	if got.dispatch != nil || got.winner != "" || got.cleanup != nil {
		t.Errorf("never placed: dispatch %v winner %q cleanup %v, want nil, none, nil", got.dispatch, got.winner, got.cleanup)
	}
}

func TestDistOf(t *testing.T) {
	var v []float64
	for i := 100; i >= 1; i-- {
		v = append(v, float64(i))
	}
	d := DistOf(v)
	if d != (Dist{Count: 100, P50: 50, P90: 90, P99: 99, Max: 100, Mean: 50.5}) {
		t.Errorf("DistOf(1..100) = %+v", d)
	}
	if d := DistOf(nil); d != (Dist{}) {
		t.Errorf("DistOf(nil) = %+v, want zero", d)
	}
	if d := DistOf([]float64{7}); d.P50 != 7 || d.P99 != 7 || d.Count != 1 {
		t.Errorf("DistOf(7) = %+v", d)
	}
}

func TestParseActiveDetail(t *testing.T) {
	r, m := parseActiveDetail(`reason=ClientConnectionFailed message="dial tcp: refused \"x\""`)
	if r != "ClientConnectionFailed" || m != `dial tcp: refused "x"` {
		t.Errorf("got %q %q", r, m)
	}
}
