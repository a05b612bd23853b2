package scenario_test

import (
	"context"
	"os"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestDispatchOnThreeWorkers is the foundation's end-to-end acceptance:
// 1 manager + 3 workers, 20 Jobs submitted concurrently, each admitted exactly
// once, nominations cleared, every Workload Finished, nothing left on the
// workers, and no process left after teardown.
func TestDispatchOnThreeWorkers(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	topo, err := local.New(ctx, topology.Options{Workers: 3, Progress: testlog.Writer(t)}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := topo.Provider().(*local.Provider).Dir()
	t.Logf("1 manager + 3 workers Active after %s", time.Since(start).Round(time.Millisecond))
	defer func() {
		if err := topo.Close(ctx); err != nil {
			t.Errorf("teardown: %v", err)
		}
		if left := local.ProcessesUnder(dir); len(left) > 0 {
			t.Errorf("processes left after teardown: %v", left)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("temporary directory %s left after teardown (stat: %v)", dir, err)
		}
	}()
	want, what := 16+2*3, "etcd/kube-apiserver/kube-controller-manager/kueue (and kube-scheduler/kwok on each worker)"
	if n := len(local.ProcessesUnder(dir)); n != want {
		t.Errorf("want %d %s processes for 4 clusters, found %d", want, what, n)
	}

	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.Check.SetupActive(ctx); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	res, err := scenario.Dispatch(ctx, env, scenario.DispatchOptions{Jobs: 20, Kinds: []observe.Kind{observe.KindJob}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("20 Jobs dispatched, finished and cleaned up in %s", time.Since(start).Round(time.Millisecond))
	if len(res.Unrecorded) > 0 {
		t.Logf("Kueue %s finished %d of 20 manager Workloads without recording their placement (status.clusterName): %v", topo.Facts.Version, len(res.Unrecorded), res.Unrecorded)
	}
	perWorker := map[string]int{}
	for _, j := range res.Jobs {
		for _, w := range topo.Workers {
			if evs, _ := env.Obs.History("Job", j.Namespace, j.Name); hasCreatedOn(evs, w.Name) {
				perWorker[w.Name]++
			}
		}
	}
	t.Logf("remote Jobs per worker: %v", perWorker)
	// managedBy is defaulted by Kueue's webhook, called by the API server.
	got := &batchv1.Job{}
	if err := topo.Manager.Client.Get(ctx, client.ObjectKeyFromObject(res.Jobs[0]), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.ManagedBy == nil || *got.Spec.ManagedBy != kueue.MultiKueueControllerName {
		t.Errorf("manager Job spec.managedBy = %v, want %s (set by the webhook)", got.Spec.ManagedBy, kueue.MultiKueueControllerName)
	}
}
