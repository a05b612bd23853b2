package observe_test

import (
	"fmt"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
)

// Timeline renders recorded events per cluster with times relative to the
// first: the story a failure tells.
func ExampleTimeline() {
	t0 := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	evs := []observe.Event{
		{Time: t0, Cluster: "manager", Kind: observe.KindWorkload, Namespace: "default", Name: "job-a-1b2c3", Type: observe.Created},
		{Time: t0.Add(1500 * time.Millisecond), Cluster: "worker-1", Kind: observe.KindWorkload, Namespace: "default", Name: "job-a-1b2c3", Type: observe.Admitted},
	}
	fmt.Print(observe.Timeline(evs, []string{"manager", "worker-1", "worker-2"}))
	// Output:
	// timeline from 17:00:00.000:
	//     cluster "manager":
	//       +0s       Workload default/job-a-1b2c3 Created
	//     cluster "worker-1":
	//       +1.5s     Workload default/job-a-1b2c3 Admitted
	//     cluster "worker-2": nothing
}
