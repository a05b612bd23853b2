// Package testtopo holds what the module's tests share to start a local
// topology: it is imported by _test.go files only.
package testtopo

import (
	"context"
	"testing"

	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// StartObserved starts a local topology of its own for t, closed when t
// ends, with an Env observing it (closed first).
func StartObserved(ctx context.Context, t *testing.T, o topology.Options, lo local.Options) (*topology.Topology, *scenario.Env) {
	t.Helper()
	topo, err := local.New(ctx, o, lo)
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	return topo, env
}
