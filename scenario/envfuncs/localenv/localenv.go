// Package localenv starts the local topology (topology/local) for
// sigs.k8s.io/e2e-framework. It is apart from scenario/envfuncs because the
// local provider runs Kueue in-process and so needs this module's Kueue and
// Kubernetes pins; envfuncs itself works with any provider.
//
//	testenv = env.New()
//	testenv.Setup(localenv.SetupLocal(topology.Options{Workers: 3}, local.Options{}))
//	testenv.Finish(envfuncs.Teardown())
//
// Steps read the topology and its Observer with envfuncs.From(ctx).
package localenv

import (
	"context"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/multikueue-testkit/testkit/scenario/envfuncs"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// SetupLocal starts a local topology and observes it, as
// envfuncs.SetupTopology does for a topology made elsewhere.
func SetupLocal(opts topology.Options, lopts local.Options) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		topo, err := local.New(ctx, opts, lopts)
		if err != nil {
			return ctx, err
		}
		return envfuncs.SetupTopology(topo)(ctx, cfg)
	}
}
