package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
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

// TestLeaderWorkerSetOfTwoGroupsRunsOnOneWorker does the same with a
// LeaderWorkerSet of two groups, which Kueue admits as two Workloads: each
// group's Workload is judged (admitted once, nomination cleared, losers
// cleaned), and both must be placed on the one worker whose copy, with
// both groups, runs them.
func TestLeaderWorkerSetOfTwoGroupsRunsOnOneWorker(t *testing.T) {
	env := kubeflow.get(t)
	lws := workload.NewLeaderWorkerSet("lws-groups", "default").Queue("user-queue").Requests("250m", "128Mi").Replicas(2).Obj()
	ctx := context.Background()
	since := time.Now()
	submitServing(t, env, lws)
	c := *env.Check
	c.Since = since
	if err := c.ExactlyOnceAdmitted(ctx, lws); err != nil {
		t.Fatalf("ExactlyOnceAdmitted: %v", err)
	}
	placed := map[string][]string{}
	err := poll.Until(ctx, 30*time.Second, fmt.Sprintf("cluster %q: both groups' Workloads of LeaderWorkerSet %s/%s placed", env.Topo.Manager.Name, lws.Namespace, lws.Name), func(ctx context.Context) error {
		wls, err := observe.WorkloadsOf(ctx, env.Topo.Manager.Client, lws.Namespace, lws.UID)
		if err != nil {
			return err
		}
		clear(placed)
		n := 0
		for _, wl := range wls {
			if wl.Status.ClusterName != nil {
				placed[*wl.Status.ClusterName] = append(placed[*wl.Status.ClusterName], wl.Name)
				n++
			}
		}
		if len(wls) != 2 || n != 2 {
			return fmt.Errorf("%d Workloads, %d placed: %v", len(wls), n, placed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(placed) != 1 {
		t.Fatalf("cluster %q: the two groups' Workloads placed on %d workers (%v), want both on one", env.Topo.Manager.Name, len(placed), placed)
	}
	t.Logf("both groups' Workloads on one worker: %v", placed)
	judgeSubmitted(t, env, since, lws, "leaderworkerset_multikueue_adapter.go", "replicas=2 ready=2")
}

// TestRayClusterRunsOnOneWorkerItsStatusSynced dispatches a RayCluster (a
// head and one worker) through MultiKueue to workers that run the real
// KubeRay operator, and judges it with every assertion: admitted exactly
// once, the nomination cleared, the loser's copy removed; StatusSynced
// holds (Kueue copies a RayCluster's status: the manager's comes to show
// the running copy's) and Finished returns the limitation (a RayCluster
// runs until it is deleted); once the manager's is deleted, its copy goes
// too (NoOrphans).
func TestRayClusterRunsOnOneWorkerItsStatusSynced(t *testing.T) {
	judgeRayServing(t, kubeflow.get(t), workload.NewRayCluster("rc", "default").Queue("user-queue").Requests("250m", "128Mi").Obj())
}

// TestRayServiceRunsOnOneWorkerItsStatusSynced does the same with a
// RayService (its Ray cluster a head and one worker, one Serve
// application): the worker's KubeRay makes its RayCluster, which carries
// the RayService's labels (MultiKueue's origin among them) and is no
// orphan; Ray Serve is the local topology's stand-in (every application of
// the serve config RUNNING), and KubeRay calls the RayService Ready once its
// serve Service has an endpoint (kube-controller-manager's EndpointSlice
// controller counts the Ready pods KWOK runs).
func TestRayServiceRunsOnOneWorkerItsStatusSynced(t *testing.T) {
	judgeRayServing(t, kubeflow.get(t), workload.NewRayService("rs", "default").Queue("user-queue").Requests("250m", "128Mi").Obj())
}

// judgeRayServing submits obj, a KubeRay serving kind, and judges it with
// every assertion; the manager's must come to show the copy's started
// status, Finished must return the limitation, and once the manager's is
// deleted NoOrphans must hold.
func judgeRayServing(t *testing.T, env *scenario.Env, obj client.Object) {
	ctx := context.Background()
	ref := servingRef(obj)
	c := submitJudged(t, env, obj)
	checkEach(t, ctx, "", obj, append(placementChecks(&c), namedCheck{"StatusSynced", c.StatusSynced})...)
	mgr := env.Topo.Manager
	got := managerCopy(t, ctx, env, obj)
	if st, _ := observe.JobStateOf(got); !st.Started {
		t.Errorf("cluster %q: %s is %s after StatusSynced held, want it started (copied from the worker)", mgr.Name, ref, st.Summary)
	} else {
		t.Logf("cluster %q: %s: %s", mgr.Name, ref, st.Summary)
	}
	neverFinishedNoOrphans(t, ctx, env, &c, obj)
}

// TestRayClusterStatusThatStopsFollowingFailsStatusSynced: once a placed
// RayCluster's status has synced, the manager's stops following the
// worker's. Kueue restores a manager status changed by hand within
// milliseconds (seen here: its status patch 47 ms after the test's), so the
// test first has the manager's API server refuse Kueue's status writes to
// this RayCluster (a validating webhook, matched by CEL on Kueue's user and
// the object's name, whose endpoint does not answer: failurePolicy Fail),
// then changes the manager's status through the real API: StatusSynced must
// name both statuses.
func TestRayClusterStatusThatStopsFollowingFailsStatusSynced(t *testing.T) {
	rc := workload.NewRayCluster("rc-stale-status", "default").Queue("user-queue").Requests("250m", "128Mi").Obj()
	statusStopsFollowing(t, kubeflow.get(t), rc, "rayclusters/status", func(obj client.Object) {
		got := obj.(*rayv1.RayCluster)
		got.Status.DesiredWorkerReplicas, got.Status.ReadyWorkerReplicas = 7, 7
	}, "readyWorkers=7 desiredWorkers=7", "readyWorkers=1 desiredWorkers=1")
}

// TestRayServiceStatusThatStopsFollowingFailsStatusSynced does the same
// with a RayService: its manager's serve endpoint count changed by hand.
func TestRayServiceStatusThatStopsFollowingFailsStatusSynced(t *testing.T) {
	rs := workload.NewRayService("rs-stale-status", "default").Queue("user-queue").Requests("250m", "128Mi").Obj()
	statusStopsFollowing(t, kubeflow.get(t), rs, "rayservices/status", func(obj client.Object) {
		obj.(*rayv1.RayService).Status.NumServeEndpoints = 7
	}, "endpoints=7", "endpoints=2")
}

// statusStopsFollowing submits obj, waits for its status to sync, has the
// manager refuse Kueue's writes to its status (resource), changes the
// manager's status with change through the real API and checks that
// StatusSynced names both statuses: the manager's (changed) and the
// worker's (workerHas).
func statusStopsFollowing(t *testing.T, env *scenario.Env, obj client.Object, resource string, change func(client.Object), changed, workerHas string) {
	t.Helper()
	ctx := context.Background()
	ref := servingRef(obj)
	c := submitJudged(t, env, obj)
	if err := c.StatusSynced(ctx, obj); err != nil {
		t.Fatalf("healthy before the change: %v", err)
	}
	mgr := env.Topo.Manager
	refuseStatusWrites(t, mgr, "kueue", resource, obj.GetName())
	got := managerCopy(t, ctx, env, obj)
	orig := got.DeepCopyObject().(client.Object)
	change(got)
	if err := mgr.Client.Status().Patch(ctx, got, client.MergeFrom(orig)); err != nil {
		t.Fatalf("cluster %q: patch %s's status: %v", mgr.Name, ref, err)
	}
	kind, _ := observe.JobKindOf(obj)
	err := poll.Until(ctx, 10*time.Second, fmt.Sprintf("the Observer to record the manager's changed %s status", kind), func(context.Context) error {
		evs, _ := env.Obs.History(kind, obj.GetNamespace(), obj.GetName())
		for _, e := range evs {
			if e.Cluster == mgr.Name && e.Type == observe.JobStatus && strings.Contains(e.Detail, changed) {
				return nil
			}
		}
		return errors.New("not yet")
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Timeout = 20 * time.Second
	err = c.StatusSynced(ctx, obj)
	testtopo.FailsNaming(t, err, "StatusSynced failed", ref, `cluster "`+mgr.Name+`"`, changed, workerHas)
}

// refuseStatusWrites has cluster c's API server refuse user's writes to
// resource (a status subresource, "rayclusters/status") of the objects named
// name until the test ends: a validating webhook matched by CEL on the user
// and the name, whose endpoint does not answer, with failurePolicy Fail.
func refuseStatusWrites(t *testing.T, c *topology.Cluster, user, resource, name string) {
	t.Helper()
	ctx := context.Background()
	fail := admissionv1.Fail
	none := admissionv1.SideEffectClassNone
	url := "https://127.0.0.1:1/refuse"
	wh := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "mktk-test-refuse-" + name},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "refuse.test.multikueue.x-k8s.io",
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &url},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](1),
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Update},
				Rule:       admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{resource}},
			}},
			MatchConditions: []admissionv1.MatchCondition{
				{Name: "user", Expression: fmt.Sprintf("request.userInfo.username == %q", user)},
				{Name: "name", Expression: fmt.Sprintf("request.name == %q", name)},
			},
		}},
	}
	if err := c.Client.Create(ctx, wh); err != nil {
		t.Fatalf("cluster %q: create ValidatingWebhookConfiguration %s: %v", c.Name, wh.Name, err)
	}
	t.Cleanup(func() {
		if err := c.Client.Delete(ctx, wh); err != nil {
			t.Errorf("cluster %q: delete ValidatingWebhookConfiguration %s: %v", c.Name, wh.Name, err)
		}
	})
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

// submitJudged submits obj as submitServing does and returns a Checker that
// judges from just before.
func submitJudged(t *testing.T, env *scenario.Env, obj client.Object) assert.Checker {
	t.Helper()
	c := *env.Check
	c.Since = time.Now()
	submitServing(t, env, obj)
	return c
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
	checkEach(t, ctx, "", obj, placementChecks(&c)...)
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
	neverFinishedNoOrphans(t, ctx, env, &c, obj)
}

// managerCopy reads obj, a job object, from the manager.
func managerCopy(t *testing.T, ctx context.Context, env *scenario.Env, obj client.Object) client.Object {
	t.Helper()
	mgr := env.Topo.Manager
	kind, _ := observe.JobKindOf(obj)
	got, err := observe.NewJobObject(kind)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatalf("cluster %q: get %s: %v", mgr.Name, servingRef(obj), err)
	}
	return got
}

// neverFinishedNoOrphans checks that Finished returns the documented
// limitation for obj, a serving kind, then deletes it from the manager and
// checks that no orphan is left.
func neverFinishedNoOrphans(t *testing.T, ctx context.Context, env *scenario.Env, c *assert.Checker, obj client.Object) {
	t.Helper()
	mgr := env.Topo.Manager
	if err := c.Finished(ctx, obj); !assert.IsLimitation(err) {
		t.Errorf("Finished: want the documented limitation, got: %v", err)
	}
	if err := mgr.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("cluster %q: delete %s: %v", mgr.Name, servingRef(obj), err)
	}
	if err := c.NoOrphans(ctx); err != nil {
		t.Errorf("NoOrphans: %v", err)
	}
}

// TestServingKindWithASecondAdmissionFailsExactlyOnceAdmitted gives a
// placed StatefulSet's, LeaderWorkerSet's and RayCluster's Workload an admitted
// copy on the other worker for a moment, through the real API:
// ExactlyOnceAdmitted must name it. For a LeaderWorkerSet of two groups the
// copy is of the second group's Workload, asked about the LeaderWorkerSet.
func TestServingKindWithASecondAdmissionFailsExactlyOnceAdmitted(t *testing.T) {
	env := kubeflow.get(t)
	for _, obj := range []client.Object{
		workload.NewStatefulSet("sts-double", "default").Queue("user-queue").Requests("250m", "128Mi").Obj(),
		workload.NewLeaderWorkerSet("lws-double", "default").Queue("user-queue").Requests("250m", "128Mi").Obj(),
		workload.NewLeaderWorkerSet("lws-groups-double", "default").Queue("user-queue").Requests("250m", "128Mi").Replicas(2).Obj(),
		workload.NewRayCluster("rc-double", "default").Queue("user-queue").Requests("250m", "128Mi").Obj(),
	} {
		t.Run(obj.GetName(), func(t *testing.T) { secondAdmissionFails(t, env, obj) })
	}
}

// TestStrayServingCopiesFailNoOrphans leaves, on a worker, a StatefulSet, a
// LeaderWorkerSet and a RayCluster labelled as MultiKueue's copies whose manager objects do
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
	rc := workload.NewRayCluster("stray-rc", "default").Label(observe.LabelOrigin, origin).Label(observe.LabelPrebuiltWorkload, "raycluster-stray-rc-gone").Obj()
	rc.Spec.Suspend = nil
	strays = append(strays, rc)
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
	testtopo.FailsNaming(t, err, "NoOrphans failed", `cluster "`+w.Name+`": StatefulSet default/stray-sts (age`, `cluster "`+w.Name+`": LeaderWorkerSet default/stray-lws (age`,
		`cluster "`+w.Name+`": RayCluster default/stray-rc (age`,
		"no StatefulSet of that name on the manager", "no LeaderWorkerSet of that name on the manager", "no RayCluster of that name on the manager")
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
	testtopo.FailsNaming(t, err, `cluster "`+w.Name+`": LeaderWorkerSet default/stale-lws (age`, observe.AnnotationOriginUID+"=0b0e1a7e-stale names an earlier LeaderWorkerSet", "the manager's is "+string(live.GetUID()))
}
