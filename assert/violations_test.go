package assert_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/workload"
)

// mustFail checks that err is an assertion failure whose message contains
// every want, and logs it: the log is the documentation of what a user sees.
func mustFail(t *testing.T, err error, want ...string) {
	t.Helper()
	var f *assert.Failure
	if !errors.As(err, &f) {
		t.Fatalf("want an assertion failure, got %v", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("failure message lacks %q:\n%v", w, err)
		}
	}
	t.Logf("the failure reads:\n%v", err)
}

func checker(timeout time.Duration) *assert.Checker {
	c := assert.New(env.Topo, env.Obs)
	c.Timeout = timeout
	return c
}

func submit(t *testing.T, ctx context.Context, job *batchv1.Job) {
	t.Helper()
	if err := env.Topo.Manager.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
}

// placedOn returns the manager Workload of job and the worker it was placed on.
func placedOn(t *testing.T, ctx context.Context, job *batchv1.Job) (*kueue.Workload, string) {
	t.Helper()
	var wl kueue.Workload
	err := poll.Until(ctx, time.Minute, "the Workload to get a clusterName", func(ctx context.Context) error {
		var wls kueue.WorkloadList
		if err := env.Topo.Manager.Client.List(ctx, &wls, client.InNamespace(job.Namespace), client.MatchingLabels{observe.LabelJobUID: string(job.UID)}); err != nil {
			return err
		}
		if len(wls.Items) == 0 || wls.Items[0].Status.ClusterName == nil {
			return errors.New("not placed yet")
		}
		wl = wls.Items[0]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &wl, *wl.Status.ClusterName
}

func otherWorker(name string) string {
	for _, w := range env.Topo.Workers {
		if w.Name != name {
			return w.Name
		}
	}
	return ""
}

func TestHealthyRunPassesEveryAssertion(t *testing.T) {
	ctx := context.Background()
	job := workload.NewJob("healthy", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(time.Second).Obj()
	submit(t, ctx, job)
	a := assert.For(t, checker(2*time.Minute))
	a.SetupActive(ctx)
	a.ExactlyOnceAdmitted(ctx, job)
	a.NominationCleared(ctx, job)
	a.Finished(ctx, job)
	a.NoOrphans(ctx)
}

// TestExactlyOnceAdmittedCatchesAShortLivedSecondAdmission gives a second
// worker an admitted copy of a placed workload for under a second, then
// removes it; the assertion, run afterwards, still sees it.
func TestExactlyOnceAdmittedCatchesAShortLivedSecondAdmission(t *testing.T) {
	ctx := context.Background()
	job := workload.NewJob("double", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(20 * time.Second).Obj()
	submit(t, ctx, job)
	if err := checker(time.Minute).ExactlyOnceAdmitted(ctx, job); err != nil {
		t.Fatalf("healthy before the injection: %v", err)
	}
	wl, winner := placedOn(t, ctx, job)
	loser := env.Topo.Worker(otherWorker(winner))
	// Inject a while after the placement, well clear of the skew allowance
	// (assert.DefaultSkew) for informer delivery: a scenario delay, not a
	// wait for state.
	<-time.After(time.Second)

	copyWl := workload.NewWorkload(wl.Name, wl.Namespace).Queue("user-queue").Requests("1", "1Gi").
		Label(observe.LabelOrigin, env.Topo.Spec.Kueue.Origin).Obj()
	created := time.Now()
	if err := loser.Client.Create(ctx, copyWl); err != nil {
		t.Fatal(err)
	}
	err := poll.UntilEvery(ctx, 30*time.Second, 10*time.Millisecond, "the injected copy to be admitted", func(ctx context.Context) error {
		got := &kueue.Workload{}
		if err := loser.Client.Get(ctx, client.ObjectKeyFromObject(copyWl), got); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, kueue.WorkloadAdmitted) {
			return errors.New("not admitted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := loser.Client.Delete(ctx, copyWl); err != nil {
		t.Fatal(err)
	}
	lived := time.Since(created)
	t.Logf("the second admitted copy on %s lived %s", loser.Name, lived.Round(time.Millisecond))
	if lived > time.Second {
		t.Logf("note: the copy lived longer than a second on this machine")
	}
	err = poll.Until(ctx, 10*time.Second, "the copy's deletion to be observed", func(context.Context) error {
		evs, _ := env.Obs.History(observe.KindWorkload, wl.Namespace, wl.Name)
		for _, e := range evs {
			if e.Cluster == loser.Name && e.Type == observe.Deleted {
				return nil
			}
		}
		return errors.New("not yet")
	})
	if err != nil {
		t.Fatal(err)
	}
	mustFail(t, checker(time.Minute).ExactlyOnceAdmitted(ctx, job),
		"ExactlyOnceAdmitted failed", `cluster "`+loser.Name+`"`, wl.Name, "after the manager had selected", `cluster "`+winner+`"`)
	_ = env.Topo.Manager.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

// TestNominationClearedCatchesAPartialAllAtOnceNomination writes, through the
// real API and past Kueue's webhook, a placement whose nomination skipped an
// Active worker: what AllAtOnce must never do.
func TestNominationClearedCatchesAPartialAllAtOnceNomination(t *testing.T) {
	ctx := context.Background()
	mgr := env.Topo.Manager
	// A ClusterQueue without the MultiKueue check, so no dispatcher touches it.
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: kueue.ClusterQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{},
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1ResourceName{"cpu"}, Flavors: []kueue.FlavorQuotas{{
			Name: "default-flavor", Resources: []kueue.ResourceQuota{{Name: "cpu", NominalQuota: resourceMustParse("1")}},
		}}}},
	}}
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "plain"}}
	for _, o := range []client.Object{cq, lq} {
		if err := mgr.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	wl := workload.NewWorkload("hand-placed", "default").Queue("plain").Obj()
	wl.Spec.Active = ptr.To(false) // keep the scheduler away
	if err := mgr.Client.Create(ctx, wl); err != nil {
		t.Fatal(err)
	}
	only := env.Topo.Workers[0].Name
	wl.Status.NominatedClusterNames = []string{only}
	if err := mgr.Client.Status().Update(ctx, wl); err != nil {
		t.Fatal(err)
	}
	wl.Status.NominatedClusterNames = nil
	wl.Status.ClusterName = ptr.To(only)
	if err := mgr.Client.Status().Update(ctx, wl); err != nil {
		t.Fatal(err)
	}
	mustFail(t, checker(30*time.Second).NominationCleared(ctx, wl),
		"NominationCleared failed", `cluster "manager"`, "hand-placed", "AllAtOnce nominated ["+only+"]", "want every Active worker")
	for _, o := range []client.Object{wl, lq, cq} {
		_ = mgr.Client.Delete(ctx, o)
	}
}

func TestFinishedTimesOutWithTheStory(t *testing.T) {
	ctx := context.Background()
	job := workload.NewJob("slow", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(time.Hour).Obj()
	submit(t, ctx, job)
	mustFail(t, checker(5*time.Second).Finished(ctx, job), "Finished failed", "slow", "is not Finished", "timeline")
	if err := env.Topo.Manager.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
}

// TestNoOrphansNamesStrayRemoteCopies creates, on a worker, a Workload and a
// Job carrying MultiKueue's labels with no manager counterpart.
func TestNoOrphansNamesStrayRemoteCopies(t *testing.T) {
	ctx := context.Background()
	w := env.Topo.Workers[1]
	origin := env.Topo.Spec.Kueue.Origin
	stray := workload.NewWorkload("stray-wl", "default").Queue("user-queue").Requests("1", "1Gi").Label(observe.LabelOrigin, origin).Obj()
	job := workload.NewJob("stray-job", "default").Label(observe.LabelOrigin, origin).Label(observe.LabelPrebuiltWorkload, "stray-wl").Obj()
	for _, o := range []client.Object{stray, job} {
		if err := w.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	mustFail(t, checker(time.Minute).NoOrphans(ctx),
		"NoOrphans failed", `cluster "`+w.Name+`": Workload default/stray-wl (age`, `cluster "`+w.Name+`": Job default/stray-job (age`,
		"no Workload of that name on the manager", "no Job of that name on the manager")
	for _, o := range []client.Object{stray, job} {
		_ = w.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground))
	}
}

// TestSetupActiveReportsABrokenConnection points a MultiKueueCluster at a
// Secret that does not exist, then restores it.
func TestSetupActiveReportsABrokenConnection(t *testing.T) {
	ctx := context.Background()
	mgr := env.Topo.Manager
	name := env.Topo.Workers[1].Name
	mkc := &kueue.MultiKueueCluster{}
	if err := mgr.Client.Get(ctx, client.ObjectKey{Name: name}, mkc); err != nil {
		t.Fatal(err)
	}
	orig := mkc.Spec.ClusterSource.DeepCopy()
	mkc.Spec.ClusterSource.KubeConfig.Location = "no-such-secret"
	if err := mgr.Client.Update(ctx, mkc); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := mgr.Client.Get(ctx, client.ObjectKey{Name: name}, mkc); err != nil {
			t.Fatal(err)
		}
		mkc.Spec.ClusterSource = *orig
		if err := mgr.Client.Update(ctx, mkc); err != nil {
			t.Fatal(err)
		}
		if err := env.Topo.WaitActive(ctx); err != nil {
			t.Fatalf("setup did not recover: %v", err)
		}
	}()
	mustFail(t, checker(10*time.Second).SetupActive(ctx),
		"SetupActive failed", `cluster "manager" MultiKueueCluster `+name, "Active=False")
}

func TestFailureMessagesAreRedacted(t *testing.T) {
	token := "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJl"
	kc := string(env.Topo.Workers[0].Kubeconfig)
	f := &assert.Failure{Assertion: "X", Expected: "y", Problems: []string{"token: " + token, "kubeconfig: " + kc}}
	msg := f.Error()
	if strings.Contains(msg, token) || strings.Contains(msg, "BEGIN") {
		t.Fatalf("credentials in a failure message:\n%s", msg)
	}
}
