package existing_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
)

// capiClusterProxy stands for sigs.k8s.io/cluster-api/test/framework's
// ClusterProxy, which a CAPZ e2e spec holds for the bootstrap and each
// workload cluster. Its GetName and GetRESTConfig are all existing needs.
type capiClusterProxy interface {
	GetName() string
	GetRESTConfig() *rest.Config
}

// A CAPZ e2e spec: the AKS manager and workers are CAPI workload clusters,
// Kueue is installed on them (topology/install), MultiKueue is already set
// up by the spec (adopt); the canonical dispatch is judged from history.
func ExampleNew_capzSpec() {
	var managerProxy capiClusterProxy    // e.g. bootstrapClusterProxy.GetWorkloadCluster(ctx, ns, "mk-manager")
	var workerProxies []capiClusterProxy // one per AKS worker cluster
	if managerProxy == nil {
		return // this example compiles; it needs real clusters to run
	}
	ctx := context.Background()
	o := existing.Options{Mode: existing.ModeAdopt, Manager: existing.Proxy(managerProxy)}
	for _, p := range workerProxies {
		o.Workers = append(o.Workers, existing.Proxy(p))
	}
	topo, err := existing.New(ctx, topology.Options{Progress: os.Stderr}, o)
	if err != nil {
		panic(err)
	}
	defer topo.Close(ctx) // adopt mode: removes nothing from the clusters
	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		panic(err)
	}
	defer env.Close()
	if _, err := scenario.Dispatch(ctx, env, scenario.DispatchOptions{Jobs: 10}); err != nil {
		panic(err) // names the cluster and object; with $ARTIFACTS set, a report and dumps are written
	}
	fmt.Println("gcInterval read from the manager:", topo.Spec.GCInterval())
}

// A Kueue integration test: its envtest Environments give rest configs, Kueue
// runs in the test; the testkit wires MultiKueue (kubeconfig Secret connector
// by default) and removes what it created on Close. Kueue's configuration is
// not in a ConfigMap there, so the harness hands the Configuration it started
// the manager's Kueue with over; without it, the facts it holds would be
// Kueue's defaults, marked unknown (Topology.Facts.Assumed).
func ExampleNew_kueueIntegrationTest() {
	var t *testing.T                                    // the test's
	var managerCfg, worker1Cfg, worker2Cfg *rest.Config // envtest.Environment.Config of each cluster
	var kueueCfg *configapi.Configuration               // what the harness gave the manager's Kueue
	if t == nil {
		return // this example compiles; it needs the test's clusters to run
	}
	ctx := context.Background()
	topo, err := existing.New(ctx,

		topology.Options{WorkerQuota: topology.Quota{CPU: "2", Memory: "4Gi"}}, existing.Options{
			Mode:               existing.ModeWire,
			Manager:            existing.RESTConfig("manager", managerCfg),
			Workers:            []existing.Cluster{existing.RESTConfig("worker1", worker1Cfg), existing.RESTConfig("worker2", worker2Cfg)},
			KueueConfiguration: kueueCfg,
		})

	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	assert.For(t, env.Check).SetupActive(ctx)
}

// Bad input is one error naming the field, before any cluster is
// contacted: here, a worker given without a way to reach it.
func ExampleNew_badInput() {
	_, err := existing.New(context.Background(), topology.Options{}, existing.Options{
		Mode:    existing.ModeWire,
		Manager: existing.Cluster{Name: "manager", Config: &rest.Config{Host: "https://manager.example:6443"}},
		Workers: []existing.Cluster{{Name: "worker-1"}},
	})
	fmt.Println(err)
	// Output: existing: Options.Workers[0].Config: nil for cluster "worker-1"
}
