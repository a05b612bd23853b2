package scenario_test

import (
	"context"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/scenario"
)

// TestStatusSync: for each kind, a job that succeeds and one that fails; the
// manager's job ends as built and as its remote copy, with an identical
// final status.
func TestStatusSync(t *testing.T) {
	env := mixed.get(t)
	start := time.Now()
	res, ok := scenario.For(t, env).StatusSync(context.Background(), scenario.StatusSyncOptions{})
	t.Logf("%d jobs in %s (ok=%t)", len(res.Objects), time.Since(start).Round(time.Millisecond), ok)
}
