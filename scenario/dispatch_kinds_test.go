package scenario_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
)

// TestDispatchEachKind runs the dispatch scenario for each job kind the
// topology's integrations enable (batch/Job, JobSet, RayJob; the local
// workers run the JobSet controller and the KubeRay operator), one kind at a
// time and then all mixed.
func TestDispatchEachKind(t *testing.T) {
	env := mixed.get(t)
	for _, tc := range []struct {
		name  string
		kinds []observe.Kind
	}{
		{"Job", []observe.Kind{observe.KindJob}},
		{"JobSet", []observe.Kind{observe.KindJobSet}},
		{"RayJob", []observe.Kind{observe.KindRayJob}},
		{"Mixed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res, ok := scenario.For(t, env).Dispatch(context.Background(), scenario.DispatchOptions{
				Jobs: 3, Kinds: tc.kinds, NamePrefix: "kinds-" + strings.ToLower(tc.name), CPU: "500m", Memory: "256Mi",
			})
			t.Logf("%d jobs in %s (ok=%t); per worker %v", len(res.Objects), time.Since(start).Round(time.Millisecond), ok, res.PerWorker())
		})
	}
}
