package assert

import (
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// A wait for a placement ends, naming the cause, once the manager Workload
// finished (or went) without a clusterName; it goes on while the Workload
// is pending or finished only on a worker.
func TestNeverPlacedStopsTheWait(t *testing.T) {
	tg := target{namespace: "default", workload: "job-a-1", job: "a", jobKind: observe.KindJob}
	t0 := time.Date(2026, 12, 1, 11, 54, 36, 0, time.UTC)
	pending := []observe.Event{
		{Cluster: "manager", Type: observe.Created, Time: t0},
		{Cluster: "manager", Type: observe.Nominated, Time: t0.Add(time.Second), Values: []string{"worker-1", "worker-2"}},
		{Cluster: "worker-1", Type: observe.Finished, Time: t0.Add(8 * time.Second)},
	}
	if err := neverPlaced(pending, "manager", tg); err != nil {
		t.Fatalf("pending (finished on a worker only): %v", err)
	}
	done := append(pending, observe.Event{Cluster: "manager", Type: observe.Finished, Time: t0.Add(15 * time.Second)})
	err := neverPlaced(done, "manager", tg)
	if err == nil || !strings.Contains(err.Error(), "without ever getting a status.clusterName") || !strings.Contains(err.Error(), "Workload default/job-a-1") {
		t.Fatalf("finished without a clusterName: got %v", err)
	}
}

// A manager Workload that ended without a clusterName, while one worker
// created the remote Job and ran it, was placed there: placements reads the
// cycle from the workers. Recorded placements are left as they are.
func TestPlacementsInferAnUnrecordedPlacement(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 11, 54, 36, 0, time.UTC)
	wl := []observe.Event{
		{Cluster: "manager", Kind: observe.KindWorkload, Type: observe.Created, Time: t0},
		{Cluster: "worker-1", Kind: observe.KindWorkload, Type: observe.Admitted, Time: t0.Add(300 * time.Millisecond)},
		{Cluster: "worker-2", Kind: observe.KindWorkload, Type: observe.Admitted, Time: t0.Add(400 * time.Millisecond)},
		{Cluster: "manager", Kind: observe.KindWorkload, Type: observe.Finished, Time: t0.Add(3 * time.Second)},
	}
	jobs := []observe.Event{
		{Cluster: "manager", Kind: observe.KindJob, Type: observe.Created, Time: t0},
		{Cluster: "worker-2", Kind: observe.KindJob, Type: observe.Created, Time: t0.Add(500 * time.Millisecond)},
	}
	cy, _ := placements(wl, jobs, "manager")
	if len(cy) != 1 || cy[0].cluster != "worker-2" || !cy[0].inferred || !cy[0].start.Equal(t0.Add(500*time.Millisecond)) || !cy[0].end.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("want one inferred cycle on worker-2 from +500ms to +3s, got %+v", cy)
	}
	if cy, _ := placements(wl[:3], jobs, "manager"); len(cy) != 0 {
		t.Fatalf("a Workload still pending has no inferred placement, got %+v", cy)
	}
	recorded := append([]observe.Event{}, wl[:3]...)
	recorded = append(recorded, observe.Event{Cluster: "manager", Kind: observe.KindWorkload, Type: observe.ClusterNameSet, Time: t0.Add(time.Second), Values: []string{"worker-2"}}, wl[3])
	if cy, _ := placements(recorded, jobs, "manager"); len(cy) != 1 || cy[0].inferred {
		t.Fatalf("a recorded placement is not inferred, got %+v", cy)
	}
}

// After an unrecorded placement (the remote Job on worker-1, no
// status.clusterName on the manager), a second dispatch that gets a copy
// admitted on worker-3 is named for its cause (RedoneDispatch); the same
// admission after a recorded selection is the plain violation.
func TestRedoneDispatchIsNamed(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 21, 40, 41, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	c := &Checker{Topo: &topology.Topology{
		Manager: &topology.Cluster{Name: "manager"},
		Workers: []*topology.Cluster{{Name: "worker-1"}, {Name: "worker-3"}},
	}}
	tg := target{namespace: "default", workload: "job-restart-job-5-dfa62", jobKind: observe.KindJob}
	wl := []observe.Event{
		{Cluster: "manager", Kind: observe.KindWorkload, Type: observe.Created, Time: ms(111)},
		{Cluster: "worker-1", Kind: observe.KindWorkload, Type: observe.Created, Time: ms(712)},
		{Cluster: "worker-1", Kind: observe.KindWorkload, Type: observe.Admitted, Time: ms(905)},
		{Cluster: "worker-3", Kind: observe.KindWorkload, Type: observe.Created, Time: ms(8291)},
		{Cluster: "worker-3", Kind: observe.KindWorkload, Type: observe.QuotaReserved, Time: ms(8367)},
		{Cluster: "manager", Kind: observe.KindWorkload, Type: observe.Finished, Time: ms(8695)},
	}
	jobs := []observe.Event{
		{Cluster: "manager", Kind: observe.KindJob, Type: observe.Created, Time: t0},
		{Cluster: "worker-1", Type: observe.Created, Time: ms(2708), Labels: map[string]string{observe.LabelPrebuiltWorkload: tg.workload}},
		{Cluster: "worker-1", Type: observe.JobStarted, Time: ms(2900)},
	}
	cycles, _ := placements(wl, jobs, "manager")
	problems := c.judgeCycles(tg, cycles, wl, jobs)
	if len(problems) != 1 || !strings.Contains(problems[0], RedoneDispatch) || !strings.Contains(problems[0], `cluster "worker-3"`) || !strings.Contains(problems[0], "started at +2.9s") {
		t.Fatalf("want one problem on worker-3 naming RedoneDispatch and the first Job's start, got %q", problems)
	}
	recorded := append([]observe.Event{{Cluster: "manager", Kind: observe.KindWorkload, Type: observe.ClusterNameSet, Time: ms(2700), Values: []string{"worker-1"}}}, wl...)
	cycles, _ = placements(recorded, jobs, "manager")
	problems = c.judgeCycles(tg, cycles, recorded, jobs)
	if len(problems) != 1 || strings.Contains(problems[0], RedoneDispatch) || !strings.Contains(problems[0], `after the manager had selected "worker-1"`) {
		t.Fatalf("a recorded selection: want the plain violation, got %q", problems)
	}
}
