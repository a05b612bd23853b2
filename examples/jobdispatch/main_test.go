// Package jobdispatch is the main example: with sigs.k8s.io/e2e-framework it
// stands up the embedded topology (1 manager + 3 workers, real kube-apiservers
// and real Kueue, no Docker) and proves the canonical batch/Job behaviour of
// MultiKueue: dispatch, exactly-once admission on one worker, nomination
// cleanup, completion and remote cleanup; then one JobSet and one RayJob
// through the same assertions (the embedded workers run the real JobSet
// controller and KubeRay operator).
//
//	go test ./examples/...                                  # embedded clusters
//	MKTK_KUBECONFIGS=manager=m.kubeconfig,worker-1=w1.kubeconfig go test ./examples/...   # yours
package jobdispatch

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/examples/internal/substrate"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/scenario/envfuncs"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

var testenv env.Environment

func TestMain(m *testing.M) {
	testenv = env.New()
	// The embedded local topology, or the clusters MKTK_KUBECONFIGS names.
	testenv.Setup(func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		topo, err := substrate.New(ctx, topology.Options{Workers: 3, Progress: os.Stderr,
			Kueue: topology.KueueOptions{Integrations: substrate.Integrations()}})
		if err != nil {
			return ctx, err
		}
		return envfuncs.SetupTopology(topo)(ctx, cfg)
	})
	testenv.Finish(envfuncs.Teardown())
	// Binaries first, where no test timeout counts their build.
	if err := substrate.Prepare(context.Background(), substrate.Integrations()...); err != nil {
		fmt.Fprintln(os.Stderr, "examples:", err)
		os.Exit(1)
	}
	os.Exit(testenv.Run(m))
}

func TestBatchJobThroughMultiKueue(t *testing.T) {
	f := features.New("batch/Job through MultiKueue").
		Assess("the MultiKueue setup is Active", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			e := mustEnv(ctx, t)
			assert.Require(t, e.Check).SetupActive(ctx)
			return ctx
		}).
		Assess("one Job runs on exactly one worker and is cleaned up", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			e := mustEnv(ctx, t)
			q := e.Topo.Spec.Queues
			size := e.Topo.JobSize() // what the provider's nodes fit: 1 CPU here, 100m on kind
			job := workload.NewJob("sample", q.Namespaces[0]).Queue(q.LocalQueue).Requests(size.CPU, size.Memory).RunFor(time.Second).Obj()
			if err := e.Topo.Manager.Client.Create(ctx, job); err != nil {
				t.Fatal(err)
			}
			a := assert.For(t, e.Check)
			a.ExactlyOnceAdmitted(ctx, job)
			a.NominationCleared(ctx, job)
			a.Finished(ctx, job)
			a.NoOrphans(ctx)
			return ctx
		}).
		Assess("20 Jobs submitted at once", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			e := mustEnv(ctx, t)
			if _, err := scenario.Dispatch(ctx, e, scenario.DispatchOptions{Jobs: 20, Kinds: []observe.Kind{observe.KindJob}, NamePrefix: "burst"}); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// TestEveryKindThroughTheSameAssertions submits one job of each kind the
// clusters run (batch/Job, JobSet and RayJob on the embedded topology) and
// judges each with the same assertions.
func TestEveryKindThroughTheSameAssertions(t *testing.T) {
	f := features.New("each job kind through MultiKueue").
		Assess("each kind runs on exactly one worker, ends identical on the manager and is cleaned up", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			e := mustEnv(ctx, t)
			q := e.Topo.Spec.Queues
			size := e.Topo.JobSize() // per pod: a JobSet's and a RayJob's several pods must fit the provider's nodes
			for _, kind := range scenario.Kinds(e) {
				t.Run(string(kind), func(t *testing.T) {
					job, err := scenario.JobTemplate{Kind: kind, Name: "each-" + strings.ToLower(string(kind)), Namespace: q.Namespaces[0],
						Queue: q.LocalQueue, CPU: size.CPU, Memory: size.Memory, RunFor: time.Second}.Build()
					if err != nil {
						t.Fatal(err)
					}
					if err := e.Topo.Manager.Client.Create(ctx, job); err != nil {
						t.Fatal(err)
					}
					a := assert.For(t, e.Check)
					a.ExactlyOnceAdmitted(ctx, job)
					a.NominationCleared(ctx, job)
					a.Finished(ctx, job)
					a.StatusSynced(ctx, job)
				})
			}
			assert.For(t, e.Check).NoOrphans(ctx)
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

func mustEnv(ctx context.Context, t *testing.T) *scenario.Env {
	t.Helper()
	e, err := envfuncs.From(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
