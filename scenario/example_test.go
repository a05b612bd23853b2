package scenario_test

import (
	"context"
	"fmt"
	"log"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// Dispatch 20 batch/Jobs at once on a local topology of 1 manager + 3
// workers and prove each ran exactly once, finished with its status synced,
// and left nothing behind. (Compiled, not run: it starts a topology.)
func ExampleDispatch() {
	ctx := context.Background()
	topo, err := local.New(ctx, topology.Options{Workers: 3}, local.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer topo.Close(ctx)
	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		log.Fatal(err)
	}
	defer env.Close()
	res, err := scenario.Dispatch(ctx, env, scenario.DispatchOptions{Jobs: 20, Kinds: []observe.Kind{observe.KindJob}})
	if err != nil {
		log.Fatal(err) // names each Job, check, cluster and object that failed
	}
	fmt.Println(len(res.Jobs), "Jobs ran exactly once")
}

// Every scenario's result says where each job was placed (the manager's
// status.clusterName, else the worker that ran it); PerWorker counts them.
func ExampleDispatchResult_PerWorker() {
	res := scenario.DispatchResult{Placement: map[string]string{
		"Job default/dispatch-job-0": "worker-1",
		"Job default/dispatch-job-1": "worker-2",
		"Job default/dispatch-job-2": "worker-1",
	}}
	fmt.Println(res.PerWorker())
	// Output: map[worker-1:2 worker-2:1]
}
