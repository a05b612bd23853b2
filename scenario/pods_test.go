package scenario_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestPodSucceedsAndFails dispatches a plain Pod (Kueue's pod integration)
// that succeeds and one that fails: the manager's pod stays gated while
// MultiKueue runs its copy on a worker and copies the copy's status back;
// each is judged with every assertion Dispatch runs.
func TestPodSucceedsAndFails(t *testing.T) {
	env := kubeflow.get(t)
	for _, fails := range []bool{false, true} {
		t.Run(fmt.Sprintf("fails=%t", fails), func(t *testing.T) {
			prefix := "plain"
			if fails {
				prefix = "plain-failing"
			}
			start := time.Now()
			res, ok := scenario.For(t, env).Dispatch(context.Background(), scenario.DispatchOptions{
				Kinds: []observe.Kind{observe.KindPod}, NamePrefix: prefix, CPU: "250m", Memory: "128Mi", Fails: fails,
			})
			t.Logf("Pod in %s (ok=%t); placed on %v", time.Since(start).Round(time.Millisecond), ok, res.PerWorker())
		})
	}
}

// TestPodGroupRunsOnOneWorker submits a pod group of three (one Workload
// for all), judges every pod with the per-job assertions and checks that
// all three ran on the one worker the group's Workload was placed on.
func TestPodGroupRunsOnOneWorker(t *testing.T) {
	env := kubeflow.get(t)
	start := time.Now()
	pods := workload.NewPodGroup("group", "default").Size(3).Queue("user-queue").Requests("250m", "128Mi").RunFor(2 * time.Second).Objs()
	submitPodGroup(t, env, pods)
	judgePodGroup(t, env, start, pods)
	c := *env.Check
	c.Since = start
	if err := c.NoOrphans(context.Background()); err != nil {
		t.Error(err)
	}
}

// submitPodGroup creates a group's pods on the manager and deletes them at
// the test's end.
func submitPodGroup(t *testing.T, env *scenario.Env, pods []*corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	mgr := env.Topo.Manager
	for _, p := range pods {
		if err := mgr.Client.Create(ctx, p); err != nil {
			t.Fatalf("cluster %q: create Pod %s/%s: %v", mgr.Name, p.Namespace, p.Name, err)
		}
		t.Cleanup(func() { _ = mgr.Client.Delete(ctx, p, client.PropagationPolicy(metav1.DeletePropagationBackground)) })
	}
}

// judgePodGroup judges each pod of a group, submitted at since, with the
// per-job assertions, and checks that every pod ran on one worker.
func judgePodGroup(t *testing.T, env *scenario.Env, since time.Time, pods []*corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	c := *env.Check
	c.Since = since
	ranOn := map[string]bool{}
	for _, p := range pods {
		ref := fmt.Sprintf("Pod %s/%s", p.Namespace, p.Name)
		for _, a := range []struct {
			name  string
			check func(context.Context, client.Object) error
		}{{"Finished", c.Finished}, {"ExactlyOnceAdmitted", c.ExactlyOnceAdmitted}, {"NominationCleared", c.NominationCleared},
			{"LosersCleaned", c.LosersCleaned}, {"StatusSynced", c.StatusSynced}} {
			if err := a.check(ctx, p); err != nil {
				t.Errorf("%s: %s: %v", ref, a.name, err)
			}
		}
		evs, _ := env.Obs.History(observe.KindPod, p.Namespace, p.Name)
		for _, e := range evs {
			if e.Type == observe.JobSucceeded && e.Cluster != env.Topo.Manager.Name {
				ranOn[e.Cluster] = true
			}
		}
		var got corev1.Pod
		if err := env.Topo.Manager.Client.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			t.Errorf("cluster %q: read %s: %v", env.Topo.Manager.Name, ref, err)
		} else if got.Status.Phase != corev1.PodSucceeded {
			t.Errorf("cluster %q: %s is %s, want Succeeded (its copy's status)", env.Topo.Manager.Name, ref, got.Status.Phase)
		}
	}
	if len(ranOn) != 1 {
		t.Errorf("the group's pods succeeded on %d workers (%v), want all on one", len(ranOn), ranOn)
	}
}

// TestStrayPodCopyFailsNoOrphans leaves on a worker a pod labelled as
// MultiKueue's copy whose manager pod does not exist, created through the
// real API: NoOrphans must name it, and not the pods of a group that runs
// beside it correctly.
func TestStrayPodCopyFailsNoOrphans(t *testing.T) {
	env := kubeflow.get(t)
	ctx := context.Background()
	w := env.Topo.Workers[1]
	stray := workload.NewPod("stray-pod", "default").Label(observe.LabelOrigin, env.Topo.Spec.Kueue.Origin).
		Label(observe.LabelPrebuiltWorkload, "pod-stray-pod-gone").Obj()
	if err := w.Client.Create(ctx, stray); err != nil {
		t.Fatalf("cluster %q: create Pod default/stray-pod: %v", w.Name, err)
	}
	t.Cleanup(func() { _ = w.Client.Delete(ctx, stray) })
	err := assert.New(env.Topo, env.Obs).NoOrphans(ctx)
	failsNaming(t, err, "NoOrphans failed", `cluster "`+w.Name+`": Pod default/stray-pod (age`, "no Pod of that name on the manager")
}

// TestPodWithASecondAdmissionFailsExactlyOnceAdmitted gives a placed Pod's
// Workload an admitted copy on the other worker for a moment, through the
// real API: ExactlyOnceAdmitted must name it.
func TestPodWithASecondAdmissionFailsExactlyOnceAdmitted(t *testing.T) {
	env := kubeflow.get(t)
	secondAdmissionFails(t, env, workload.NewPod("pod-double", "default").Queue("user-queue").Requests("250m", "128Mi").RunFor(time.Minute).Obj())
}
