// Package testtopo holds what the module's tests share to start a local
// topology, wait on what it runs and judge it: it is imported by _test.go
// files only.
package testtopo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"

	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// StartObserved starts a local topology of its own for t, closed when t
// ends, with an Env observing it (closed first).
func StartObserved(ctx context.Context, t testing.TB, o topology.Options, lo local.Options) (*topology.Topology, *scenario.Env) {
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

// WaitWorkload waits up to a minute for the Workload Kueue made on cluster
// c for job (created, so with a UID) and returns it; t fails naming the
// cluster and job when none comes.
func WaitWorkload(ctx context.Context, t testing.TB, c *topology.Cluster, job client.Object) *kueue.Workload {
	t.Helper()
	var wl *kueue.Workload
	err := poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: the Workload of %s/%s", c.Name, job.GetNamespace(), job.GetName()), func(ctx context.Context) error {
		var err error
		wl, err = observe.WorkloadOf(ctx, c.Client, job.GetNamespace(), job.GetUID())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return wl
}

// Bare provisions local clusters for o without MultiKueue (no connector
// run, no MultiKueue objects): clusters a user already has, with Kueue on
// them, for the providers that attach. They are closed when t ends.
func Bare(ctx context.Context, t testing.TB, o topology.Options, lo local.Options) (*topology.Cluster, []*topology.Cluster) {
	t.Helper()
	_, mgr, workers := BareProvider(ctx, t, o, lo)
	return mgr, workers
}

// BareProvider is Bare with the provider that runs the clusters (its Dir
// holds each cluster's logs).
func BareProvider(ctx context.Context, t testing.TB, o topology.Options, lo local.Options) (*local.Provider, *topology.Cluster, []*topology.Cluster) {
	t.Helper()
	spec, err := o.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	p := local.NewProvider(lo)
	t.Cleanup(func() {
		if err := p.Close(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	})
	mgr, workers, err := p.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return p, mgr, workers
}
