package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/kobj"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestPodSucceedsAndFails dispatches a plain Pod (Kueue's pod integration)
// that succeeds and one that fails: the manager's pod stays gated while
// MultiKueue runs its copy on a worker and copies the copy's status back;
// each is judged with every assertion Dispatch runs.
func TestPodSucceedsAndFails(t *testing.T) {
	dispatchSucceedsAndFails(t, kubeflow.get(t), observe.KindPod, "plain")
}

// TestPodGroupRunsOnOneWorker submits a pod group of three (one Workload
// for all), judges every pod with the per-job assertions and checks that
// all three ran on the one worker the group's Workload was placed on.
func TestPodGroupRunsOnOneWorker(t *testing.T) {
	env := kubeflow.get(t)
	start := time.Now()
	pods := workload.NewPodGroup("group", "default").Size(3).Queue("user-queue").Requests("250m", "128Mi").RunFor(2 * time.Second).Objs()
	submitPodGroup(t, env, pods)
	judgePodGroup(t, env, start, pods, corev1.PodSucceeded)
	c := *env.Check
	c.Since = start
	if err := c.NoOrphans(context.Background()); err != nil {
		t.Error(err)
	}
}

// submitPodGroup creates a group's pods on the manager and deletes them at
// the test's end; once every cleanup registered after it has run, the
// group's copies must be gone from the workers too (removeGroupCopies).
func submitPodGroup(t *testing.T, env *scenario.Env, pods []*corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	mgr := env.Topo.Manager
	if len(pods) > 0 {
		group := pods[0].Labels[workload.PodGroupNameLabel]
		t.Cleanup(func() { removeGroupCopies(t, env, pods[0].Namespace, group) })
	}
	for _, p := range pods {
		if err := mgr.Client.Create(ctx, p); err != nil {
			t.Fatalf("cluster %q: create Pod %s/%s: %v", mgr.Name, p.Namespace, p.Name, err)
		}
		t.Cleanup(func() { _ = mgr.Client.Delete(ctx, p, client.PropagationPolicy(metav1.DeletePropagationBackground)) })
	}
}

// removeGroupCopies waits until a pod group deleted on the manager is gone
// there and its MultiKueue copies are gone from every worker, and removes
// the copies Kueue left, saying so with their state. Kueue v0.19.2 leaves
// some at times: the scenario tests' CI of 2026-12-07 found two copies of
// the group of TestPodGroupWithASecondAdmissionFails… still running on a
// worker minutes later, and NoOrphans then failed five later tests sharing
// the topology; TestPodGroupFails left one or two in two of three runs the
// same day. The cause is not established (docs/findings.md); a test that
// made a group hands nothing of it to the next one.
func removeGroupCopies(t *testing.T, env *scenario.Env, namespace, group string) {
	ctx := context.Background()
	sel := client.MatchingLabels{workload.PodGroupNameLabel: group}
	mgr := env.Topo.Manager
	var kept corev1.PodList
	err := poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: pod group %s/%s deleted", mgr.Name, namespace, group), func(ctx context.Context) error {
		if err := mgr.Client.List(ctx, &kept, client.InNamespace(namespace), sel); err != nil {
			return err
		}
		if n := len(kept.Items); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
	if err != nil {
		// Not this test's verdict: Kueue keeps a group's pods (its
		// finalizer) while it cleans up; they go, and the copies are
		// still looked for.
		t.Logf("cleanup: %v: removing them", err)
		for i := range kept.Items {
			if err := kobj.Remove(ctx, mgr, &kept.Items[i]); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	}
	copiesSel := client.MatchingLabels{workload.PodGroupNameLabel: group, observe.LabelOrigin: env.Topo.Spec.Kueue.Origin}
	for _, w := range env.Topo.Workers {
		var left corev1.PodList
		err := poll.Until(ctx, 30*time.Second, fmt.Sprintf("cluster %q: MultiKueue to delete the copies of pod group %s/%s", w.Name, namespace, group), func(ctx context.Context) error {
			if err := w.Client.List(ctx, &left, client.InNamespace(namespace), copiesSel); err != nil {
				return err
			}
			if n := len(left.Items); n > 0 {
				return fmt.Errorf("%d copies left", n)
			}
			return nil
		})
		if err == nil {
			continue
		}
		var states []string
		for _, p := range left.Items {
			st := fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
			if p.DeletionTimestamp != nil {
				st += fmt.Sprintf(", deleting since %s", p.DeletionTimestamp.Format("15:04:05"))
			}
			states = append(states, st+fmt.Sprintf(", finalizers %v", p.Finalizers))
		}
		t.Logf("cleanup: %v (%s): Kueue left them after the group was deleted on the manager; removing them", err, strings.Join(states, "; "))
		for i := range left.Items {
			if err := kobj.Remove(ctx, w, &left.Items[i]); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	}
}

// TestPodGroupFails submits a pod group of two whose pods both fail (marked
// unretriable in the group, so Kueue ends it): every pod is judged with the
// per-job assertions, Finished among them, and the manager's pods must end
// Failed, their copies' status, all on one worker.
func TestPodGroupFails(t *testing.T) {
	env := kubeflow.get(t)
	start := time.Now()
	b := workload.NewPodGroup("group-failing", "default").Queue("user-queue").Requests("250m", "128Mi").Fails()
	pods := b.Objs()
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	submitPodGroup(t, env, pods)
	judgePodGroup(t, env, start, pods, corev1.PodFailed)
}

// judgePodGroup judges each pod of a group, submitted at since, with the
// per-job assertions, and checks that every pod ended in phase want (on
// the manager, its copy's status) after running on one worker.
func judgePodGroup(t *testing.T, env *scenario.Env, since time.Time, pods []*corev1.Pod, want corev1.PodPhase) {
	t.Helper()
	ctx := context.Background()
	c := *env.Check
	c.Since = since
	ranOn := map[string]bool{}
	for _, p := range pods {
		ref := fmt.Sprintf("Pod %s/%s", p.Namespace, p.Name)
		checks := append([]namedCheck{{"Finished", c.Finished}}, placementChecks(&c)...)
		checkEach(t, ctx, ref+": ", p, append(checks, namedCheck{"StatusSynced", c.StatusSynced})...)
		evs, _ := env.Obs.History(observe.KindPod, p.Namespace, p.Name)
		for _, e := range evs {
			if (e.Type == observe.JobSucceeded || e.Type == observe.JobFailed) && e.Cluster != env.Topo.Manager.Name {
				ranOn[e.Cluster] = true
			}
		}
		var got corev1.Pod
		if err := env.Topo.Manager.Client.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			t.Errorf("cluster %q: read %s: %v", env.Topo.Manager.Name, ref, err)
		} else if got.Status.Phase != want {
			t.Errorf("cluster %q: %s is %s, want %s (its copy's status)", env.Topo.Manager.Name, ref, got.Status.Phase, want)
		}
	}
	if len(ranOn) != 1 {
		t.Errorf("the group's pods ended on %d workers (%v), want all on one", len(ranOn), ranOn)
	}
}

// TestStrayPodCopyFailsNoOrphans leaves on a worker a pod labelled as
// MultiKueue's copy whose manager pod does not exist, created through the
// real API: NoOrphans must name it, and not the worker's own pod that Kueue
// manages there beside it (queued on the worker, no origin label).
func TestStrayPodCopyFailsNoOrphans(t *testing.T) {
	env := kubeflow.get(t)
	ctx := context.Background()
	w := env.Topo.Workers[1]
	stray := workload.NewPod("stray-pod", "default").Label(observe.LabelOrigin, env.Topo.Spec.Kueue.Origin).
		Label(observe.LabelPrebuiltWorkload, "pod-stray-pod-gone").Obj()
	own := workload.NewPod("workers-own-pod", "default").Queue("user-queue").Requests("100m", "64Mi").RunFor(time.Minute).Obj()
	for _, p := range []*corev1.Pod{stray, own} {
		if err := w.Client.Create(ctx, p); err != nil {
			t.Fatalf("cluster %q: create Pod default/%s: %v", w.Name, p.Name, err)
		}
		t.Cleanup(func() { _ = w.Client.Delete(ctx, p) })
	}
	err := assert.New(env.Topo, env.Obs).NoOrphans(ctx)
	testtopo.FailsNaming(t, err, "NoOrphans failed", `cluster "`+w.Name+`": Pod default/stray-pod (age`, "no Pod of that name on the manager")
	if err != nil && strings.Contains(err.Error(), "workers-own-pod") {
		t.Errorf("NoOrphans took the worker's own pod for an orphan:\n%v", err)
	}
}

// TestPodWithASecondAdmissionFailsExactlyOnceAdmitted gives a placed Pod's
// Workload an admitted copy on the other worker for a moment, through the
// real API: ExactlyOnceAdmitted must name it.
func TestPodWithASecondAdmissionFailsExactlyOnceAdmitted(t *testing.T) {
	env := kubeflow.get(t)
	secondAdmissionFails(t, env, workload.NewPod("pod-double", "default").Queue("user-queue").Requests("250m", "128Mi").RunFor(time.Minute).Obj())
}

// TestPodGroupWithASecondAdmissionFailsExactlyOnceAdmitted gives a placed
// pod group's one Workload an admitted copy on the other worker for a
// moment, through the real API: ExactlyOnceAdmitted, asked about one pod of
// the group, must name it.
func TestPodGroupWithASecondAdmissionFailsExactlyOnceAdmitted(t *testing.T) {
	env := kubeflow.get(t)
	pods := workload.NewPodGroup("group-double", "default").Queue("user-queue").Requests("250m", "128Mi").RunFor(time.Minute).Objs()
	submitPodGroup(t, env, pods[1:])
	secondAdmissionFails(t, env, pods[0])
}

// TestStrayPodGroupCopyFailsNoOrphans leaves on a worker a pod labelled as
// a MultiKueue copy of a pod group's member whose group is gone from the
// manager, created through the real API: NoOrphans must name it.
func TestStrayPodGroupCopyFailsNoOrphans(t *testing.T) {
	env := kubeflow.get(t)
	ctx := context.Background()
	w := env.Topo.Workers[0]
	stray := workload.NewPodGroup("stray-group", "default").Size(1).Objs()[0]
	stray.Labels[observe.LabelOrigin] = env.Topo.Spec.Kueue.Origin
	stray.Labels[observe.LabelPrebuiltWorkload] = "stray-group"
	if err := w.Client.Create(ctx, stray); err != nil {
		t.Fatalf("cluster %q: create Pod default/%s: %v", w.Name, stray.Name, err)
	}
	t.Cleanup(func() { _ = w.Client.Delete(ctx, stray) })
	err := assert.New(env.Topo, env.Obs).NoOrphans(ctx)
	testtopo.FailsNaming(t, err, "NoOrphans failed", `cluster "`+w.Name+`": Pod default/`+stray.Name+` (age`, "no Pod of that name on the manager")
}

// TestDeploymentPodsRunThroughMultiKueue submits a Deployment of two
// replicas: the manager's ReplicaSet controller makes two pods, Kueue's pod
// integration gives each its own Workload and MultiKueue runs each on a
// worker. Each pod is judged with the per-job assertions that need no end
// (it serves until deleted), its copy must run and the manager's pod show
// the copy's Running status; once the Deployment is deleted, NoOrphans
// must find every copy gone.
func TestDeploymentPodsRunThroughMultiKueue(t *testing.T) {
	env := kubeflow.get(t)
	ctx := context.Background()
	mgr := env.Topo.Manager
	start := time.Now()
	d := workload.NewDeployment("web", "default").Replicas(2).Queue("user-queue").Requests("250m", "128Mi").Obj()
	if err := mgr.Client.Create(ctx, d); err != nil {
		t.Fatalf("cluster %q: create Deployment default/web: %v", mgr.Name, err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = mgr.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}
	})
	var pods []corev1.Pod
	err := poll.Until(ctx, time.Minute, "the manager's ReplicaSet controller to make the Deployment's 2 pods", func(ctx context.Context) error {
		var list corev1.PodList
		if err := mgr.Client.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		if len(list.Items) != 2 {
			return fmt.Errorf("%d pods", len(list.Items))
		}
		pods = list.Items
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := *env.Check
	c.Since = start
	for i := range pods {
		p := &pods[i]
		ref := fmt.Sprintf("Pod %s/%s", p.Namespace, p.Name)
		checkEach(t, ctx, ref+": ", p, placementChecks(&c)...)
		err := poll.Until(ctx, 2*time.Minute, fmt.Sprintf("%s's copy to run and the manager's pod to show it", ref), func(context.Context) error {
			evs, _ := env.Obs.History(observe.KindPod, p.Namespace, p.Name)
			var copyOn string
			onManager := false
			for _, e := range evs {
				if e.Type == observe.JobStarted && e.UID != p.UID {
					copyOn = e.Cluster
				}
				if e.Type == observe.JobStatus && e.UID == p.UID && e.Detail == string(corev1.PodRunning) {
					onManager = true
				}
			}
			switch {
			case copyOn == "":
				return errors.New("no copy has started")
			case !onManager:
				return fmt.Errorf("the copy runs on %q; the manager's pod does not show Running", copyOn)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	var got appsv1.Deployment
	if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(d), &got); err == nil {
		t.Logf("cluster %q: Deployment default/web status: replicas=%d ready=%d available=%d", mgr.Name, got.Status.Replicas, got.Status.ReadyReplicas, got.Status.AvailableReplicas)
	}
	if err := mgr.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatalf("cluster %q: delete Deployment default/web: %v", mgr.Name, err)
	}
	deleted = true
	if err := c.NoOrphans(ctx); err != nil {
		t.Error(err)
	}
}
