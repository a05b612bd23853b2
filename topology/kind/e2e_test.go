package kind_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/kind/pkg/cluster"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/kind"
	"github.com/multikueue-testkit/testkit/workload"
)

// EnvKindTests opts in to the tests that create kind clusters.
const EnvKindTests = "MKTK_KIND"

// requireKind skips unless MKTK_KIND=1 and a container runtime with a
// reachable daemon is there; the skip message says what was looked for.
func requireKind(t testing.TB) kind.Runtime {
	t.Helper()
	if os.Getenv(EnvKindTests) != "1" {
		t.Skipf("set %s=1 to create kind clusters (needs docker, podman or nerdctl with its daemon running)", EnvKindTests)
	}
	rt, err := kind.Detect(context.Background(), "")
	if err != nil {
		t.Skipf("%s=1 but no usable container runtime: %v", EnvKindTests, err)
	}
	return rt
}

// The whole path on kind: create the clusters, load the images, install
// Kueue, wire MultiKueue, dispatch a Job that really runs (busybox on a
// kubelet), judge it with the assertions, then delete everything.
func TestKindEndToEnd(t *testing.T) {
	rt := requireKind(t)
	ctx := context.Background()
	networkBefore := exec.Command(rt.CLI, "network", "inspect", "kind").Run() == nil
	start := time.Now()
	topo, err := kind.New(ctx, topology.Options{Workers: 2, Progress: testlog.Writer(t)}, kind.Options{NamePrefix: "mktk-e2e-"})
	if err != nil {
		t.Fatal(err)
	}
	p := topo.Provider().(*kind.Provider)
	created := p.Created()
	t.Logf("topology up in %s on %s; created %v, reused %v", time.Since(start).Round(time.Second), rt, created, p.Reused())
	for _, l := range p.Images() {
		t.Logf("image %s", l)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = topo.Close(context.Background())
		}
	})

	for _, w := range topo.Workers {
		if w.ManagerServer != "https://"+p.KindName(w.Name)+"-control-plane:6443" {
			t.Errorf("worker %q: ManagerServer %q, want kind's internal address", w.Name, w.ManagerServer)
		}
	}
	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	a := assert.For(t, env.Check)
	a.SetupActive(ctx)
	q := topo.Spec.Queues
	job := workload.NewJob("kind-e2e", q.Namespaces[0]).Queue(q.LocalQueue).Requests("100m", "64Mi").RunFor(3 * time.Second).Obj()
	if err := topo.Manager.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	testtopo.DispatchedOnce(ctx, t, a, job)
	a.QuotaRespected(ctx)
	env.Close()

	dir := p.Dir()
	closed = true
	if err := topo.Close(ctx); err != nil {
		t.Fatal(err)
	}
	left, err := cluster.NewProvider().List()
	if err != nil {
		t.Fatal(err)
	}
	for _, kn := range created {
		if slices.Contains(left, kn) {
			t.Errorf("kind cluster %q still exists after Close", kn)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s still there after Close: %v", dir, err)
	}
	if !networkBefore && exec.Command(rt.CLI, "network", "inspect", "kind").Run() == nil {
		t.Error(`the "kind" network kind created for these clusters is still there after Close`)
	}
}
