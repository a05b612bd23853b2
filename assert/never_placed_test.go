package assert

import (
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
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
