package scenario_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestStatefulSetRunsOnOneWorkerItsStatusNotCopied dispatches a StatefulSet
// of two replicas through MultiKueue to workers whose kube-controller-manager
// runs the StatefulSet controller (the manager's too: its pods stay gated
// there), and judges it with every assertion: admitted exactly once, the
// nomination cleared, the loser's copy removed; StatusSynced returns the
// documented limitation (Kueue does not copy a StatefulSet's status: the
// worker's shows two ready replicas, the manager's none) and Finished
// another (a StatefulSet never finishes); once the manager's is deleted,
// its copy goes too (NoOrphans).
func TestStatefulSetRunsOnOneWorkerItsStatusNotCopied(t *testing.T) {
	sts := workload.NewStatefulSet("sts", "default").Queue("user-queue").Requests("250m", "128Mi").Replicas(2).Obj()
	judgeServing(t, kubeflow.get(t), sts, "statefulset_multikueue_adapter.go", "replicas=2 ready=2")
}

// TestLeaderWorkerSetRunsOnOneWorkerItsStatusNotCopied does the same with a
// LeaderWorkerSet of one group of a leader and a worker, on clusters that
// run the real LeaderWorkerSet controller.
func TestLeaderWorkerSetRunsOnOneWorkerItsStatusNotCopied(t *testing.T) {
	lws := workload.NewLeaderWorkerSet("lws", "default").Queue("user-queue").Requests("250m", "128Mi").Obj()
	judgeServing(t, kubeflow.get(t), lws, "leaderworkerset_multikueue_adapter.go", "replicas=1 ready=1")
}

// judgeServing submits obj, a serving kind, on the manager and judges it:
// every assertion holds but StatusSynced and Finished, which return the
// documented limitation (StatusSynced's naming where Kueue skips the sync,
// adapter, and the worker's status, workerStatus); once it is deleted, no
// orphan is left.
func judgeServing(t *testing.T, env *scenario.Env, obj client.Object, adapter, workerStatus string) {
	t.Helper()
	since := time.Now()
	submitServing(t, env, obj)
	judgeSubmitted(t, env, since, obj, adapter, workerStatus)
}

// submitServing creates obj on the manager and deletes it when the test
// ends.
func submitServing(t *testing.T, env *scenario.Env, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	mgr := env.Topo.Manager
	if err := mgr.Client.Create(ctx, obj); err != nil {
		t.Fatalf("cluster %q: create %s: %v", mgr.Name, servingRef(obj), err)
	}
	t.Cleanup(func() { _ = mgr.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)) })
}

func servingRef(obj client.Object) string {
	return fmt.Sprintf("%s %s/%s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName())
}

// judgeSubmitted is judgeServing's judgement of obj, submitted at since.
func judgeSubmitted(t *testing.T, env *scenario.Env, since time.Time, obj client.Object, adapter, workerStatus string) {
	t.Helper()
	ctx := context.Background()
	c := *env.Check
	c.Since = since
	ref := servingRef(obj)
	mgr := env.Topo.Manager
	for _, a := range []struct {
		name  string
		check func(context.Context, client.Object) error
	}{{"ExactlyOnceAdmitted", c.ExactlyOnceAdmitted}, {"NominationCleared", c.NominationCleared}, {"LosersCleaned", c.LosersCleaned}} {
		if err := a.check(ctx, obj); err != nil {
			t.Errorf("%s: %v", a.name, err)
		}
	}
	err := c.StatusSynced(ctx, obj)
	if !assert.IsLimitation(err) {
		t.Fatalf("StatusSynced: want the documented limitation, got: %v", err)
	}
	t.Logf("StatusSynced: %v", err)
	for _, want := range []string{ref, adapter, workerStatus, "ready=0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("StatusSynced's limitation lacks %q:\n%v", want, err)
		}
	}
	if err := c.Finished(ctx, obj); !assert.IsLimitation(err) {
		t.Errorf("Finished: want the documented limitation, got: %v", err)
	}
	if err := mgr.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("cluster %q: delete %s: %v", mgr.Name, ref, err)
	}
	if err := c.NoOrphans(ctx); err != nil {
		t.Errorf("NoOrphans: %v", err)
	}
}

// TestServingKindWithASecondAdmissionFailsExactlyOnceAdmitted gives a
// placed StatefulSet's and a placed LeaderWorkerSet's Workload an admitted
// copy on the other worker for a moment, through the real API:
// ExactlyOnceAdmitted must name it.
func TestServingKindWithASecondAdmissionFailsExactlyOnceAdmitted(t *testing.T) {
	env := kubeflow.get(t)
	for _, obj := range []client.Object{
		workload.NewStatefulSet("sts-double", "default").Queue("user-queue").Requests("250m", "128Mi").Obj(),
		workload.NewLeaderWorkerSet("lws-double", "default").Queue("user-queue").Requests("250m", "128Mi").Obj(),
	} {
		t.Run(obj.GetObjectKind().GroupVersionKind().Kind, func(t *testing.T) { secondAdmissionFails(t, env, obj) })
	}
}

// TestStrayServingCopiesFailNoOrphans leaves, on a worker, a StatefulSet and
// a LeaderWorkerSet labelled as MultiKueue's copies whose manager objects do
// not exist, created through the real API (their controllers run them):
// NoOrphans must name each.
func TestStrayServingCopiesFailNoOrphans(t *testing.T) {
	env := kubeflow.get(t)
	ctx := context.Background()
	w := env.Topo.Workers[1]
	origin := env.Topo.Spec.Kueue.Origin
	strays := []client.Object{
		workload.NewStatefulSet("stray-sts", "default").Label(observe.LabelOrigin, origin).Label(observe.LabelPrebuiltWorkload, "statefulset-stray-sts-gone").Obj(),
		workload.NewLeaderWorkerSet("stray-lws", "default").Label(observe.LabelOrigin, origin).Label(observe.LabelPrebuiltWorkload, "leaderworkerset-stray-lws-gone").Obj(),
	}
	for _, o := range strays {
		if err := w.Client.Create(ctx, o); err != nil {
			t.Fatalf("cluster %q: create %T %s: %v", w.Name, o, o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range strays {
			_ = w.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}
	})
	err := assert.New(env.Topo, env.Obs).NoOrphans(ctx)
	failsNaming(t, err, "NoOrphans failed", `cluster "`+w.Name+`": StatefulSet default/stray-sts (age`, `cluster "`+w.Name+`": LeaderWorkerSet default/stray-lws (age`,
		"no StatefulSet of that name on the manager", "no LeaderWorkerSet of that name on the manager")
}

// TestStaleLeaderWorkerSetCopyFailsNoOrphans: a LeaderWorkerSet's copy names
// its manager object by UID only (no prebuilt-workload-name), so one of the
// same name on the manager is not enough. A copy on a worker whose origin
// UID names an earlier object, beside a live manager LeaderWorkerSet of
// that name (one Kueue does not manage: no queue, so MultiKueue leaves it
// alone), must be named.
func TestStaleLeaderWorkerSetCopyFailsNoOrphans(t *testing.T) {
	env := kubeflow.get(t)
	ctx := context.Background()
	w := env.Topo.Workers[0]
	live := workload.NewLeaderWorkerSet("stale-lws", "default").Obj()
	submitServing(t, env, live)
	stale := workload.NewLeaderWorkerSet("stale-lws", "default").Label(observe.LabelOrigin, env.Topo.Spec.Kueue.Origin).
		Annotation(observe.AnnotationOriginUID, "0b0e1a7e-stale").Obj()
	if err := w.Client.Create(ctx, stale); err != nil {
		t.Fatalf("cluster %q: create LeaderWorkerSet default/stale-lws: %v", w.Name, err)
	}
	t.Cleanup(func() { _ = w.Client.Delete(ctx, stale, client.PropagationPolicy(metav1.DeletePropagationBackground)) })
	err := assert.New(env.Topo, env.Obs).NoOrphans(ctx)
	failsNaming(t, err, `cluster "`+w.Name+`": LeaderWorkerSet default/stale-lws (age`, observe.AnnotationOriginUID+"=0b0e1a7e-stale names an earlier LeaderWorkerSet", "the manager's is "+string(live.GetUID()))
}
