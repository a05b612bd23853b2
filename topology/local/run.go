package local

import (
	"fmt"
	"time"

	"github.com/multikueue-testkit/testkit/topology"
)

// DefaultRunDuration is how long a pod of a Job runs when it has no
// run-duration annotation (topology.AnnotationRunDuration): the default
// delay of the KWOK Stage kwok_pod_run.yaml, and of a RayJob's job on the
// Ray dashboard stand-in.
const DefaultRunDuration = time.Second

// runSpec reads how a job runs from the run-duration and outcome
// annotations of the first of sources that has each.
func runSpec(sources ...map[string]string) (time.Duration, string, error) {
	lookup := func(key string) (string, bool) {
		for _, a := range sources {
			if v, ok := a[key]; ok {
				return v, true
			}
		}
		return "", false
	}
	dur := DefaultRunDuration
	if v, ok := lookup(topology.AnnotationRunDuration); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, "", fmt.Errorf("annotation %s=%q is not a non-negative Go duration", topology.AnnotationRunDuration, v)
		}
		dur = d
	}
	outcome := topology.OutcomeSucceeded
	if v, ok := lookup(topology.AnnotationOutcome); ok {
		if v != topology.OutcomeSucceeded && v != topology.OutcomeFailed {
			return 0, "", fmt.Errorf("annotation %s=%q is neither %s nor %s", topology.AnnotationOutcome, v, topology.OutcomeSucceeded, topology.OutcomeFailed)
		}
		outcome = v
	}
	return dur, outcome, nil
}
