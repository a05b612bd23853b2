package scenario_test

import (
	"context"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/scenario"
)

// TestAllAtOnce: every kind, 2 of each, on 3 workers with the AllAtOnce
// dispatcher: every Active worker nominated and given a copy, one winner,
// the losers' copies removed.
func TestAllAtOnce(t *testing.T) {
	env := mixed.get(t)
	start := time.Now()
	res, _ := scenario.For(t, env).AllAtOnce(context.Background(), scenario.DispatchOptions{Jobs: 2, CPU: "500m", Memory: "256Mi"})
	t.Logf("%d jobs in %s; per worker %v", len(res.Objects), time.Since(start).Round(time.Millisecond), res.PerWorker())
}
