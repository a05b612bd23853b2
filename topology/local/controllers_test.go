package local_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// realControllerIntegrations are the integrations whose real controllers
// the local topology runs.
var realControllerIntegrations = []string{topology.IntegrationBatchJob, topology.IntegrationJobSet, topology.IntegrationRayJob, topology.IntegrationRayCluster}

// finalState waits until the manager's job object is finished and returns
// its state.
func finalState(ctx context.Context, t *testing.T, mgr *topology.Cluster, obj client.Object) observe.JobState {
	t.Helper()
	var st observe.JobState
	err := poll.Until(ctx, 2*time.Minute, fmt.Sprintf("cluster %q: %T %s to finish", mgr.Name, obj, obj.GetName()), func(ctx context.Context) error {
		cur := obj.DeepCopyObject().(client.Object)
		if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			return err
		}
		st, _ = observe.JobStateOf(cur)
		if !st.Finished() {
			return fmt.Errorf("not finished: %s", st.Summary)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// endAsWanted waits for each job object to finish on the manager, checks
// its outcome and summary against want (by name), and runs the
// per-workload assertions on it.
func endAsWanted(ctx context.Context, t *testing.T, mgr *topology.Cluster, a *assert.Asserter, objs []client.Object, want map[string]string) {
	t.Helper()
	for _, o := range objs {
		st := finalState(ctx, t, mgr, o)
		outcome := "Succeeded"
		if st.Failed {
			outcome = "Failed"
		}
		if got := outcome + " " + st.Summary; got != want[o.GetName()] {
			t.Errorf("cluster %q: %T %s ended %q, want %q", mgr.Name, o, o.GetName(), got, want[o.GetName()])
		}
		a.ExactlyOnceAdmitted(ctx, o)
		a.StatusSynced(ctx, o)
		a.Finished(ctx, o)
	}
}

// nothingLeft waits until no cluster has a Job, pod, RayCluster (where the
// CRD is served) or Service (but the API server's own) left in namespace ns: the real garbage
// collector collected what the job objects made.
func nothingLeft(ctx context.Context, t *testing.T, topo *topology.Topology, ns string) {
	t.Helper()
	for _, c := range topo.Clusters() {
		err := poll.Until(ctx, 2*time.Minute, fmt.Sprintf("cluster %q: no Job, pod, RayCluster or Service left in %s", c.Name, ns), func(ctx context.Context) error {
			var left []string
			var jobs batchv1.JobList
			var pods corev1.PodList
			var rcs rayv1.RayClusterList
			var svcs corev1.ServiceList
			for _, l := range []client.ObjectList{&jobs, &pods, &rcs, &svcs} {
				err := c.Client.List(ctx, l, client.InNamespace(ns))
				if err != nil && !meta.IsNoMatchError(err) { // no Ray CRDs without a Ray integration
					return err
				}
			}
			for _, j := range jobs.Items {
				left = append(left, "Job "+j.Name)
			}
			for _, p := range pods.Items {
				left = append(left, "Pod "+p.Name)
			}
			for _, r := range rcs.Items {
				left = append(left, "RayCluster "+r.Name)
			}
			for _, s := range svcs.Items {
				if s.Name != "kubernetes" {
					left = append(left, "Service "+s.Name)
				}
			}
			if len(left) > 0 {
				return errors.New(strings.Join(left, ", "))
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
}

// TestJobSetAndRayJobOnRealControllers dispatches a JobSet and a RayJob
// that succeed and a JobSet and a RayJob that fail to a topology whose
// workers run the real JobSet controller and KubeRay operator: each is
// admitted exactly once, reaches its real terminal state on the worker,
// and the manager's status ends identical. A RayCluster dispatched too
// becomes ready on its worker (head and 2 workers Running and Ready) and
// the manager's shows it. Deleted on the manager, nothing MultiKueue made
// is left and the real garbage collector leaves no child Job, pod,
// RayCluster or Service on any cluster.
func TestJobSetAndRayJobOnRealControllers(t *testing.T) {
	ctx := context.Background()
	topo, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 2, Kueue: topology.KueueOptions{Integrations: realControllerIntegrations}}, local.Options{})
	mgr, lq := topo.Manager, topo.Spec.Queues.LocalQueue

	objs := []client.Object{
		workload.NewJobSet("js-ok", "default").Queue(lq).Replicas(2).Requests("100m", "64Mi").RunFor(time.Second).Obj(),
		workload.NewJobSet("js-fail", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Fails().Obj(),
		workload.NewRayJob("rj-ok", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj(),
		workload.NewRayJob("rj-fail", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Fails().Obj(),
	}
	start := time.Now()
	for _, o := range objs {
		if err := mgr.Client.Create(ctx, o); err != nil {
			t.Fatalf("cluster %q: create %T %s: %v", mgr.Name, o, o.GetName(), err)
		}
	}
	want := map[string]string{
		"js-ok":   "Succeeded restarts=0 terminalState=Completed",
		"js-fail": "Failed restarts=0 terminalState=Failed",
		"rj-ok":   "Succeeded deployment=Complete job=SUCCEEDED",
		"rj-fail": "Failed deployment=Failed job=FAILED",
	}
	a := assert.For(t, env.Check)
	endAsWanted(ctx, t, mgr, a, objs, want)
	t.Logf("4 job objects (2 JobSets, 2 RayJobs, 1 s runs) finished on the manager %s after creation", time.Since(start).Round(time.Millisecond))

	rc := workload.NewRayCluster("rc", "default").Queue(lq).Requests("100m", "64Mi").WorkerReplicas(2).Obj()
	if err := mgr.Client.Create(ctx, rc); err != nil {
		t.Fatalf("cluster %q: create RayCluster: %v", mgr.Name, err)
	}
	start = time.Now()
	err := poll.Until(ctx, 2*time.Minute, fmt.Sprintf("cluster %q: RayCluster default/rc to be ready", mgr.Name), func(ctx context.Context) error {
		cur := &rayv1.RayCluster{}
		if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(rc), cur); err != nil {
			return err
		}
		if cur.Status.State != rayv1.Ready || cur.Status.ReadyWorkerReplicas != 2 {
			return fmt.Errorf("state %q, %d ready workers", cur.Status.State, cur.Status.ReadyWorkerReplicas)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RayCluster of a head and 2 workers ready on the manager %s after creation", time.Since(start).Round(time.Millisecond))
	readyPods := 0
	for _, w := range topo.Workers {
		var pods corev1.PodList
		if err := w.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"ray.io/cluster": rc.Name}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				readyPods++
			}
		}
	}
	if readyPods != 3 {
		t.Errorf("%d Running Ray pods of RayCluster default/rc on the workers, want 3 (head and 2 workers)", readyPods)
	}

	for _, o := range append(objs, rc) {
		if err := mgr.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}
	a.NoOrphans(ctx)
	nothingLeft(ctx, t, topo, "default")
}
