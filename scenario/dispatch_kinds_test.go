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
// topology's integrations enable (batch/Job and JobSet), one kind at a time
// and then mixed. JobSets are judged on placement only while no controller
// runs them on the local workers (AllowIdleKinds); the log says which kinds
// ran.
func TestDispatchEachKind(t *testing.T) {
	env := mixed.get(t)
	for _, tc := range []struct {
		name  string
		kinds []observe.Kind
	}{
		{"Job", []observe.Kind{observe.KindJob}},
		{"JobSet", []observe.Kind{observe.KindJobSet}},
		{"Mixed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res, ok := scenario.For(t, env).Dispatch(context.Background(), scenario.DispatchOptions{
				Jobs: 3, Kinds: tc.kinds, NamePrefix: "kinds-" + strings.ToLower(tc.name), CPU: "500m", Memory: "256Mi", AllowIdleKinds: true,
			})
			t.Logf("%d jobs in %s (ok=%t); per worker %v; judged on placement only: %v", len(res.Objects), time.Since(start).Round(time.Millisecond), ok, res.PerWorker(), res.IdleKinds)
			for _, k := range res.IdleKinds {
				if k == observe.KindJob {
					t.Errorf("batch/Job judged idle: the local executor runs Jobs")
				}
			}
		})
	}
}
