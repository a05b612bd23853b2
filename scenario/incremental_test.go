package scenario_test

import (
	"context"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestIncrementalDispatcherNominatesInRounds runs the Incremental dispatcher
// on 4 workers: the first round nominates the first 3 by name, and the
// history-based assertions hold.
func TestIncrementalDispatcherNominatesInRounds(t *testing.T) {
	ctx := context.Background()
	topo, err := local.New(ctx, topology.Options{
		WorkerNames: []string{"delta", "alpha", "charlie", "bravo"},
		Kueue:       topology.KueueOptions{Dispatcher: topology.DispatcherIncremental},
	}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	job := workload.NewJob("rounds", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(time.Second).Obj()
	if err := topo.Manager.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	a := assert.For(t, env.Check)
	a.DispatchedIncrementally(ctx, job)
	a.ExactlyOnceAdmitted(ctx, job)
	a.LosersCleaned(ctx, job)
	a.Finished(ctx, job)
	a.NoOrphans(ctx)
	for _, e := range nominations(env, job.Namespace) {
		t.Log(e)
	}
}
