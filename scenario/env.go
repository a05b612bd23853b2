package scenario

import (
	"context"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// Env is a topology with an Observer recording it and a Checker over both.
type Env struct {
	Topo  *topology.Topology
	Obs   *observe.Observer
	Check *assert.Checker
}

// Observe starts an Observer on topo. Close the Env (not the topology) when
// done; the topology stays the caller's.
func Observe(ctx context.Context, topo *topology.Topology) (*Env, error) {
	return ObserveWith(ctx, topo, observe.Options{})
}

// ObserveWith is Observe with Observer options.
func ObserveWith(ctx context.Context, topo *topology.Topology, opts observe.Options) (*Env, error) {
	obs, err := observe.Start(ctx, topo, opts)
	if err != nil {
		return nil, err
	}
	return &Env{Topo: topo, Obs: obs, Check: assert.New(topo, obs)}, nil
}

// Close stops the Observer.
func (e *Env) Close() { e.Obs.Stop() }
