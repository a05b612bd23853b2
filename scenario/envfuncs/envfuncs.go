// Package envfuncs plugs a topology into sigs.k8s.io/e2e-framework:
// SetupTopology observes a topology made with any provider and puts it in the
// context, Teardown closes both, and From reads them back in a feature's
// steps.
//
//	testenv = env.New()
//	testenv.Setup(envfuncs.SetupTopology(topo))
//	testenv.Finish(envfuncs.Teardown())
//
// It does not import the local provider (topology/local), so it builds in
// modules whose Kubernetes pins the in-process Kueue does not support; for the
// local topology use scenario/envfuncs/localenv.SetupLocal.
package envfuncs

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
)

type envKey struct{}

// SetupTopology observes a topology that the caller made with any provider
// and stores it in the context for From and Teardown. If the Observer does
// not start, it closes the topology and returns both errors.
func SetupTopology(topo *topology.Topology) env.Func {
	return func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
		e, err := scenario.Observe(ctx, topo)
		if err != nil {
			return ctx, errors.Join(err, topo.Close(context.WithoutCancel(ctx)))
		}
		return context.WithValue(ctx, envKey{}, e), nil
	}
}

// Teardown stops the Observer and closes the topology.
func Teardown() env.Func {
	return func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
		e, err := From(ctx)
		if err != nil {
			return ctx, err
		}
		e.Close()
		return ctx, e.Topo.Close(ctx)
	}
}

// From returns the Env that Setup stored in ctx.
func From(ctx context.Context) (*scenario.Env, error) {
	e, ok := ctx.Value(envKey{}).(*scenario.Env)
	if !ok {
		return nil, fmt.Errorf("envfuncs: no topology in the context; add envfuncs.SetupTopology or localenv.SetupLocal to the environment's Setup")
	}
	return e, nil
}
