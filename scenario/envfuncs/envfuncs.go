// Package envfuncs plugs a topology into sigs.k8s.io/e2e-framework: Setup
// starts a local topology and an Observer and puts them in the context,
// Teardown closes both, and From reads them back in a feature's steps.
//
//	testenv = env.New()
//	testenv.Setup(envfuncs.SetupLocal(topology.Options{Workers: 3}, local.Options{}))
//	testenv.Finish(envfuncs.Teardown())
package envfuncs

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

type envKey struct{}

// SetupLocal starts a local topology and observes it.
func SetupLocal(opts topology.Options, lopts local.Options) env.Func {
	return func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
		topo, err := local.New(ctx, opts, lopts)
		if err != nil {
			return ctx, err
		}
		return attach(ctx, topo)
	}
}

// SetupTopology observes a topology that the caller made with any provider.
func SetupTopology(topo *topology.Topology) env.Func {
	return func(ctx context.Context, _ *envconf.Config) (context.Context, error) { return attach(ctx, topo) }
}

func attach(ctx context.Context, topo *topology.Topology) (context.Context, error) {
	e, err := scenario.Observe(ctx, topo)
	if err != nil {
		return ctx, errors.Join(err, topo.Close(context.WithoutCancel(ctx)))
	}
	return context.WithValue(ctx, envKey{}, e), nil
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
		return nil, fmt.Errorf("envfuncs: no topology in the context; add envfuncs.SetupLocal or SetupTopology to the environment's Setup")
	}
	return e, nil
}
