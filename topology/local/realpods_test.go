package local_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestRealPods runs Jobs with Options.RealPods: on the worker the real Job
// controller creates the pods and the pod runner runs them, the executor is
// off. A Job of two pods succeeds, a Job fails (backoffLimit 0), a JobSet's
// child Job succeeds; each manager status ends identical to the worker's,
// with the counts the Job controller computed from the pods; deleted, no
// pod or Job is left anywhere.
func TestRealPods(t *testing.T) {
	ctx := context.Background()
	topo, err := local.New(ctx, topology.Options{Workers: 1, Kueue: topology.KueueOptions{
		Integrations: []string{topology.IntegrationBatchJob, topology.IntegrationJobSet},
	}}, local.Options{RealPods: true})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	mgr, w, lq := topo.Manager, topo.Workers[0], topo.Spec.Queues.LocalQueue

	objs := []client.Object{
		workload.NewJob("pods-ok", "default").Queue(lq).Parallelism(2).Completions(2).Requests("100m", "64Mi").RunFor(time.Second).Obj(),
		workload.NewJob("pods-fail", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Fails().Obj(),
		workload.NewJobSet("pods-set", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj(),
	}
	want := map[string]string{
		"pods-ok":   "Succeeded active=0 succeeded=2 failed=0",
		"pods-fail": "Failed active=0 succeeded=0 failed=1",
		"pods-set":  "Succeeded restarts=0 terminalState=Completed",
	}
	start := time.Now()
	for _, o := range objs {
		if err := mgr.Client.Create(ctx, o); err != nil {
			t.Fatalf("cluster %q: create %T %s: %v", mgr.Name, o, o.GetName(), err)
		}
	}
	a := assert.For(t, env.Check)
	endAsWanted(ctx, t, mgr, a, objs, want)
	t.Logf("2 Jobs and a JobSet (1 s runs, 4 pods) finished on the manager %s after creation", time.Since(start).Round(time.Millisecond))

	// The pods were the Job controller's (its tracking finalizer removed),
	// and the executor did not touch the Jobs.
	var pods corev1.PodList
	if err := w.Client.List(ctx, &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			t.Errorf("cluster %q: pod %s is %s after its Job finished", w.Name, p.Name, p.Status.Phase)
		}
		if len(p.Finalizers) > 0 {
			t.Errorf("cluster %q: pod %s keeps finalizers %v", w.Name, p.Name, p.Finalizers)
		}
	}
	writes, err := topo.Provider().(*local.Provider).AuditSource(w.Name).Writes(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	for _, wr := range writes {
		if wr.Resource.Resource == "jobs" && wr.Subresource == "status" && wr.User != "system:kube-controller-manager" {
			t.Errorf("cluster %q: Job %s status written by %s, want only the Job controller", w.Name, wr.Name, wr.User)
		}
	}

	for _, o := range objs {
		if err := mgr.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}
	a.NoOrphans(ctx)
	nothingLeft(ctx, t, topo, "default")
}
