package topology

// Annotations that tell a local topology's KWOK Nodes how a pod "runs": no
// kubelet runs its containers, a KWOK Stage moves a Running pod of a Job to
// Succeeded (exit code 0) or Failed (exit code 1) after its run duration.
// The builders of package workload set them on the pod template (and on the
// job object, what the test asked for); a RayJob's run is read off the
// RayJob by the Ray dashboard stand-in.
const (
	// AnnotationRunDuration is a Go duration (for example "2s") between a
	// pod becoming Running and ending. Default 1s.
	AnnotationRunDuration = "testkit.multikueue.x-k8s.io/run-duration"
	// AnnotationOutcome is "Succeeded" (default) or "Failed".
	AnnotationOutcome = "testkit.multikueue.x-k8s.io/outcome"
)

// Job outcomes for AnnotationOutcome.
const (
	OutcomeSucceeded = "Succeeded"
	OutcomeFailed    = "Failed"
)

// DefaultJobImage is the image of the pods the workload builders make
// (workload.DefaultImage): a busybox that sleeps for the run duration and
// exits 0 or 1. Providers that load images onto nodes (kind) load it on the
// workers, so that no job pulls from a registry.
const DefaultJobImage = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
