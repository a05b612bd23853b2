package local_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// gone waits until obj is not found on cluster c.
func gone(ctx context.Context, t *testing.T, c *topology.Cluster, obj client.Object, timeout time.Duration) {
	t.Helper()
	what := fmt.Sprintf("cluster %q: %T %s/%s to be deleted", c.Name, obj, obj.GetNamespace(), obj.GetName())
	err := poll.Until(ctx, timeout, what, func(ctx context.Context) error {
		cur := obj.DeepCopyObject().(client.Object)
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there (deletionTimestamp %v, finalizers %v)", cur.GetDeletionTimestamp(), cur.GetFinalizers())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// remoteCopy waits until worker w has the Workload wl's copy and returns it.
func remoteCopy(ctx context.Context, t *testing.T, w *topology.Cluster, wl *kueue.Workload) *kueue.Workload {
	t.Helper()
	cp := &kueue.Workload{}
	err := poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: a copy of Workload %s/%s", w.Name, wl.Namespace, wl.Name), func(ctx context.Context) error {
		return w.Client.Get(ctx, client.ObjectKeyFromObject(wl), cp)
	})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestRealGarbageCollector proves that kube-controller-manager replaced the
// owner-GC stand-in: a foreground delete of a running Job with a Workload
// completes (the stand-in never cleared foregroundDeletion, so this hung),
// the deleted Jobs' Workloads and their remote copies are collected, and a
// namespace delete completes. The manager's audit log names
// kube-controller-manager as the Workloads' deleter.
func TestRealGarbageCollector(t *testing.T) {
	ctx := context.Background()
	topo, err := local.New(ctx, topology.Options{Workers: 1}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	mgr, w := topo.Manager, topo.Workers[0]
	lq := topo.Spec.Queues.LocalQueue
	start := time.Now()

	// With requests: Kueue v0.18+ would admit a Job requesting nothing on
	// the manager, without MultiKueue (assert: neverPlaced).
	running := workload.NewJob("gc-foreground", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Hour).Obj()
	done := workload.NewJob("gc-background", "default").Queue(lq).Requests("100m", "64Mi").RunFor(0).Obj()
	for _, j := range []*batchv1.Job{running, done} {
		if err := mgr.Client.Create(ctx, j); err != nil {
			t.Fatalf("cluster %q: create Job %s: %v", mgr.Name, j.Name, err)
		}
	}
	runningWl := testtopo.WaitWorkload(ctx, t, mgr, running)
	doneWl := testtopo.WaitWorkload(ctx, t, mgr, done)
	runningCopy := remoteCopy(ctx, t, w, runningWl)
	err = poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: Workload %s to finish", mgr.Name, doneWl.Name), func(ctx context.Context) error {
		cur := &kueue.Workload{}
		if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(doneWl), cur); err != nil {
			return err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == kueue.WorkloadFinished && c.Status == metav1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not Finished")
	})
	if err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	if err := mgr.Client.Delete(ctx, running, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Client.Delete(ctx, done, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	gone(ctx, t, mgr, running, time.Minute)
	t.Logf("foreground delete of a running Job with its Workload completed in %s", time.Since(t0).Round(time.Millisecond))
	gone(ctx, t, mgr, runningWl, time.Minute)
	gone(ctx, t, mgr, done, time.Minute)
	gone(ctx, t, mgr, doneWl, time.Minute)
	// MultiKueue removes the copies once the manager's Workload is gone.
	gone(ctx, t, w, runningCopy, time.Minute)
	gone(ctx, t, w, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: running.Name}}, time.Minute)

	writes, err := topo.Provider().(*local.Provider).AuditSource(mgr.Name).Writes(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	deleters := map[string]string{}
	for _, wr := range writes {
		if wr.Verb == "delete" && wr.Resource.Resource == "workloads" {
			deleters[wr.Name] = wr.User
		}
	}
	for _, wl := range []*kueue.Workload{runningWl, doneWl} {
		if got := deleters[wl.Name]; got != "system:kube-controller-manager" {
			t.Errorf("cluster %q: Workload %s deleted by %q, want kube-controller-manager's garbage collector", mgr.Name, wl.Name, got)
		}
	}

	// A namespace with objects in it is deleted to the end.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gc-namespace"}}
	if err := w.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "data"}, Data: map[string]string{"k": "v"}}
	job := workload.NewJob("own", ns.Name).RunFor(time.Hour).Obj()
	job.Spec.Suspend = nil
	for _, o := range []client.Object{cm, job} {
		if err := w.Client.Create(ctx, o); err != nil {
			t.Fatalf("cluster %q: create %T: %v", w.Name, o, err)
		}
	}
	t0 = time.Now()
	if err := w.Client.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	gone(ctx, t, w, ns, 2*time.Minute)
	t.Logf("namespace with a ConfigMap and a running Job deleted in %s", time.Since(t0).Round(time.Millisecond))
}
