package scenario_test

import (
	"context"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/scenario"
)

// TestManagerRestart stops the manager's Kueue with Jobs placed and running
// and others waiting, lets a remote Job finish while it is down, starts it
// again: every Job admitted exactly once and finished, statuses synced,
// quota respected, nothing left behind.
func TestManagerRestart(t *testing.T) {
	env := resilient.get(t)
	start := time.Now()
	res, ok := scenario.For(t, env).ManagerRestart(context.Background(), scenario.RestartOptions{})
	if !ok || res.Started.IsZero() {
		return // For reported it; the times below are not all known
	}
	t.Logf("%d Jobs in %s; at the stop %d placed, %d waiting; %d remote Jobs finished during the %s down",
		len(res.Objects), time.Since(start).Round(time.Millisecond), res.PlacedAtStop, res.PendingAtStop, res.FinishedWhileDown,
		res.Started.Sub(res.Stopped).Round(time.Millisecond))
}
