package scenario_test

import (
	"context"
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
)

// testWriter sends progress lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func hasCreatedOn(evs []observe.Event, cluster string) bool {
	for _, e := range evs {
		if e.Cluster == cluster && e.Type == observe.Created {
			return true
		}
	}
	return false
}

func scenarioObserve(ctx context.Context, topo *topology.Topology) (*scenario.Env, error) {
	return scenario.Observe(ctx, topo)
}
