package topology

// Annotations that tell a local topology's job executor how a Job "runs".
// There is no kubelet on local workers; the executor plays the Job controller
// for unsuspended Jobs on workers. Kueue copies annotations to the remote Job,
// so they are set on the manager's Job (see package workload).
const (
	// AnnotationRunDuration is a Go duration (for example "2s") between the
	// Job being marked running and being marked finished. Default 1s.
	AnnotationRunDuration = "testkit.multikueue.x-k8s.io/run-duration"
	// AnnotationOutcome is "Succeeded" (default) or "Failed".
	AnnotationOutcome = "testkit.multikueue.x-k8s.io/outcome"
)

// Job outcomes for AnnotationOutcome.
const (
	OutcomeSucceeded = "Succeeded"
	OutcomeFailed    = "Failed"
)
