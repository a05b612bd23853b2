package workload_test

import (
	"fmt"
	"time"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

// A Job for a LocalQueue: created suspended (Kueue unsuspends it), with the
// run duration and outcome the local topology's workers honour and the
// same behaviour on a real kubelet (its pod sleeps, then exits 0 or 1).
func ExampleNewJob() {
	job := workload.NewJob("train", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(2 * time.Second).Fails().Obj()
	fmt.Println(job.Labels[workload.QueueLabel], *job.Spec.Suspend)
	fmt.Println(job.Annotations[topology.AnnotationRunDuration], job.Annotations[topology.AnnotationOutcome])
	c := job.Spec.Template.Spec.Containers[0]
	fmt.Println(c.Resources.Requests.Cpu(), c.Resources.Requests.Memory())
	// Output:
	// user-queue true
	// 2s Failed
	// 1 1Gi
}

// A JobSet of two replicated jobs' pods, for the JobSet integration.
func ExampleNewJobSet() {
	js := workload.NewJobSet("js", "default").Queue("user-queue").Replicas(2).Requests("100m", "64Mi").Obj()
	fmt.Println(js.Labels[workload.QueueLabel], *js.Spec.Suspend, len(js.Spec.ReplicatedJobs), js.Spec.ReplicatedJobs[0].Replicas)
	// Output:
	// user-queue true 1 2
}
