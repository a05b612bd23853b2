package scenario_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestIncrementalDispatcher runs the Incremental scenario on 4 workers named
// out of order: each job's first round nominates the first 3 by name
// (DispatchedIncrementally) and every Dispatch check holds.
//
// With MKTK_INCREMENTAL_ESCALATION=1 it also runs the escalation check
// (IncrementalOptions.Escalate): Kueue v0.17.0's 5-minute round timeout is a
// constant, so that takes about 6 minutes and is not part of the CI path.
// "delta" has the quota the escalating job needs; the first round's workers
// have less.
func TestIncrementalDispatcher(t *testing.T) {
	ctx := context.Background()
	escalate := os.Getenv("MKTK_INCREMENTAL_ESCALATION") == "1"
	_, env := testtopo.StartObserved(ctx, t, topology.Options{
		WorkerNames:  []string{"delta", "alpha", "charlie", "bravo"},
		WorkerQuotas: map[string]topology.Quota{"delta": {CPU: "8", Memory: "8Gi"}},
		Kueue:        topology.KueueOptions{Dispatcher: topology.DispatcherIncremental},
	}, local.Options{})
	start := time.Now()
	res, _ := scenario.For(t, env).Incremental(ctx, scenario.IncrementalOptions{
		Dispatch: scenario.DispatchOptions{Jobs: 4, NamePrefix: "rounds"},
		Escalate: escalate,
	})
	t.Logf("%d jobs in %s; per worker %v", len(res.Objects), time.Since(start).Round(time.Millisecond), res.PerWorker())
	for _, e := range nominations(env, "default") {
		t.Log(e)
	}
	if esc := res.Escalation; esc != nil {
		for i, r := range esc.Rounds {
			t.Logf("escalation %s: round %d at %s: %v", esc.Job, i+1, r.At.Format("15:04:05.000"), r.Clusters)
		}
		t.Logf("escalation %s: admitted on %s", esc.Job, esc.Worker)
	}
}
