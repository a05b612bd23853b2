package assert_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/kobj"
	"github.com/multikueue-testkit/testkit/internal/kueuefix"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// multiKueueSA is the ServiceAccount the manager's MultiKueue acts as on the
// workers of the shared topology (connect.KubeconfigSecret's default).
func multiKueueSA() types.NamespacedName {
	return types.NamespacedName{Namespace: env.Topo.Spec.Kueue.Namespace, Name: "multikueue-" + env.Topo.Manager.Name}
}

// withGuard installs the guard (connect.InstallGuard, off by default) on w
// for the test: MultiKueue may then change there only what it created. It
// is removed when the test ends.
func withGuard(t *testing.T, ctx context.Context, w *topology.Cluster) {
	t.Helper()
	start := time.Now()
	if err := connect.InstallGuard(ctx, w, multiKueueSA(), env.Topo.Spec.Kueue.Integrations); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster %q: guard enforced in %s", w.Name, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := connect.RemoveGuard(ctx, w, multiKueueSA()); err != nil {
			t.Error(err)
		}
	})
}

// ownJob creates on worker w its own Job namespace/name, as a user of that
// cluster would: no queue, no MultiKueue label, running (its pod on the
// worker's KWOK Node). It is deleted when the test ends.
func ownJob(t *testing.T, ctx context.Context, w *topology.Cluster, name string, finalizers ...string) *batchv1.Job {
	t.Helper()
	own := workload.NewJob(name, "default").RunFor(time.Hour).Obj()
	own.Spec.Suspend = nil
	own.Finalizers = finalizers
	if err := w.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeFrom(t, ctx, w, own) })
	jobObserved(t, ctx, w.Name, own, observe.JobStarted)
	return own
}

// removeFrom deletes obj from cluster cl (dropping its finalizers) and waits
// until it is gone.
func removeFrom(t *testing.T, ctx context.Context, cl *topology.Cluster, obj client.Object) {
	t.Helper()
	if err := kobj.Remove(ctx, cl, obj); err != nil {
		t.Error(err)
	}
}

// sameJob reports whether w still has the very Job own (same UID), not
// being deleted.
func sameJob(ctx context.Context, w *topology.Cluster, own *batchv1.Job) error {
	cur := &batchv1.Job{}
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(own), cur); err != nil {
		return fmt.Errorf("cluster %q: the worker's own Job %s/%s: %w", w.Name, own.Namespace, own.Name, err)
	}
	if cur.UID != own.UID || !cur.DeletionTimestamp.IsZero() {
		return fmt.Errorf("cluster %q: Job %s/%s is UID %s (deletion %v), want the worker's own %s untouched", w.Name, own.Namespace, own.Name, cur.UID, cur.DeletionTimestamp, own.UID)
	}
	return nil
}

// TestForeignUntouchedCatchesKueueDeletingAWorkersOwnJob reproduces a defect
// of Kueue v0.17.0 (kubernetes-sigs/kueue#11849, fixed upstream by #11877):
// MultiKueue deletes a worker's own Job that merely has the namespace and
// name of a manager Job. It does so when it removes the losing worker's
// objects (deterministic here: the worker's queue is held, so it loses),
// when the workload finishes, and sometimes before dispatch (no guard: the
// default). The per-workload assertions, which
// used to take the worker's Job for a remote copy ("remote Job default/h3
// created at +0s while no worker was selected"), pass: it is not
// MultiKueue's. The verdict follows the version the topology runs: before
// v0.18.2 ForeignUntouched must name the deletion; from v0.18.2, which has
// the fix (#11877 in v0.19.0, #12380 in v0.18.2), it must pass with the Job intact.
func TestForeignUntouchedCatchesKueueDeletingAWorkersOwnJob(t *testing.T) {
	ctx := context.Background()
	w := env.Topo.Workers[0]
	setStopPolicy(t, ctx, w, kueue.Hold)
	defer setStopPolicy(t, ctx, w, kueue.None)
	c := checker(2 * time.Minute)
	c.Since = time.Now()
	own := ownJob(t, ctx, w, "h3")
	job := workload.NewJob("h3", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(500 * time.Millisecond).Obj()
	submit(t, ctx, job)
	a := assert.For(t, c)
	testtopo.DispatchedOnce(ctx, t, a, job)
	// MultiKueue deletes by name before it dispatches and again once the
	// workload finished: by now the defect had every chance to show.
	err := c.ForeignUntouched(ctx)
	if kueueFixed(t, fixedForeignJobs, "kubernetes-sigs/kueue#11849 (MultiKueue deletes a worker's own Job of the manager Job's name), fixed by #11877 and its cherry-pick #12380") {
		if err != nil {
			t.Fatalf("Kueue %s has the fix, yet: %v", env.Topo.Facts.Version, err)
		}
		if e := sameJob(ctx, w, own); e != nil {
			t.Fatalf("Kueue %s has the fix, yet the worker's Job changed: %v", env.Topo.Facts.Version, e)
		}
		return
	}
	if err == nil {
		if e := sameJob(ctx, w, own); e != nil {
			t.Fatalf("the worker's Job changed yet ForeignUntouched passed: %v", e)
		}
		t.Fatal("the worker's own Job default/h3 survived the manager Job of that name: Kueue no longer has this defect (kueue#11849), turn this test around")
	}
	testtopo.FailsNaming(t, err, "ForeignUntouched failed", `cluster "`+w.Name+`": Job default/h3`, "UID "+string(own.UID),
		"without the "+observe.LabelOrigin+" label", "was deleted at", "while the manager's Job of that name",
		serviceAccountUser())
}

// TestForeignJobOnALosingWorkerIsNotACopy is the false failure a user met:
// a worker has its own Job default/h4, and a manager Job of that name runs
// on another worker. Kueue v0.17.0 would delete the worker's Job (see
// above) and, with the guard, never place the workload (see
// TestGuardKeepsAWorkersOwnJob); so there is no guard and a finalizer keeps
// the Job there, terminating, for the rest to be judged with it present: no
// per-workload assertion takes it for a copy. (ForeignUntouched, rightly,
// fails here: the test above covers it.)
func TestForeignJobOnALosingWorkerIsNotACopy(t *testing.T) {
	ctx := context.Background()
	loser, winner := env.Topo.Workers[0], env.Topo.Workers[1]
	setStopPolicy(t, ctx, loser, kueue.Hold) // it cannot win
	defer setStopPolicy(t, ctx, loser, kueue.None)
	c := checker(2 * time.Minute)
	c.Since = time.Now()
	ownJob(t, ctx, loser, "h4", "testkit.multikueue.x-k8s.io/hold")
	job := workload.NewJob("h4", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(500 * time.Millisecond).Obj()
	submit(t, ctx, job)
	a := assert.For(t, c)
	testtopo.DispatchedOnce(ctx, t, a, job)
	a.QuotaRespected(ctx)
	if _, on := placedOn(t, ctx, job); on != winner.Name {
		t.Errorf("placed on %q, want %q (the other worker's queue is held)", on, winner.Name)
	}
}

// TestExactlyOnceAdmittedSaysTheWinnersJobIsNotMultiKueues puts a worker's
// own Job default/h5 on the only worker that can win, guarded. Before
// v0.18.2 MultiKueue cannot delete it; it then finds the name taken and
// never creates its copy (kubernetes-sigs/kueue#12404): the manager's Job is
// tied to someone else's Job. Once the manager Job is deleted, MultiKueue
// tries to delete the worker's Job by name; the guard denies it, and
// ForeignUntouched names the attempt and the guard. From v0.18.2 (the fix; seen on v0.19.2) the
// workload is never placed while the Job is there, and the failure says the
// worker holds its own Job.
func TestExactlyOnceAdmittedSaysTheWinnersJobIsNotMultiKueues(t *testing.T) {
	ctx := context.Background()
	held, winner := env.Topo.Workers[0], env.Topo.Workers[1]
	withGuard(t, ctx, winner)
	setStopPolicy(t, ctx, held, kueue.Hold)
	defer setStopPolicy(t, ctx, held, kueue.None)
	c := checker(time.Minute)
	c.Since = time.Now()
	var wlName string
	// MultiKueue cannot remove its remote Workload (it deletes the job
	// object first, which the guard denies): the test does, last.
	t.Cleanup(func() { removeRemoteWorkloads(t, ctx, wlName) })
	own := ownJob(t, ctx, winner, "h5")
	job := workload.NewJob("h5", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(500 * time.Millisecond).Obj()
	submit(t, ctx, job)
	if kueueFixed(t, fixedForeignJobs, "MultiKueue deleting or replacing a worker's own Job of the manager Job's name (#11877: only MultiKueue's remote Jobs are deleted)") {
		// Kueue v0.19.2 leaves the worker's Job alone and never places the
		// workload while it is there (seen: no clusterName within a
		// minute): ExactlyOnceAdmitted must fail for it, and nothing may
		// touch the worker's Job, before or after the manager's goes.
		wlName = testtopo.WaitWorkload(ctx, t, env.Topo.Manager, job).Name
		err := c.ExactlyOnceAdmitted(ctx, job)
		testtopo.FailsNaming(t, err, "ExactlyOnceAdmitted failed", wlName,
			`what holds it: cluster "`+winner.Name+`" holds its own Job default/h5 (UID `+string(own.UID), "not MultiKueue's (no "+observe.LabelOrigin+" label)")
		remove(t, ctx, job)
		if err := sameJob(ctx, winner, own); err != nil {
			t.Error(err)
		}
		if err := c.ForeignUntouched(ctx); err != nil {
			t.Errorf("with the guard on: %v", err)
		}
		return
	}
	wl, on := placedOn(t, ctx, job)
	wlName = wl.Name
	if on != winner.Name {
		t.Fatalf("placed on %q, want %q (the other worker's queue is held)", on, winner.Name)
	}
	testtopo.FailsNaming(t, c.ExactlyOnceAdmitted(ctx, job), "ExactlyOnceAdmitted failed", wl.Name,
		`cluster "`+winner.Name+`": cycle 1: the job object Job default/h5 on the selected worker is not MultiKueue's (no `+observe.LabelOrigin+` label`,
		"MultiKueue could not create its copy", "(not MultiKueue's)")
	// Deleting the manager Job makes MultiKueue remove the remote objects of
	// that name on every worker: the guard denies it the worker's Job.
	remove(t, ctx, job)
	guardDenied(t, ctx, winner, "h5", c.Since)
	if err := sameJob(ctx, winner, own); err != nil {
		t.Error(err)
	}
	testtopo.FailsNaming(t, c.ForeignUntouched(ctx), "ForeignUntouched failed", `cluster "`+winner.Name+`": MultiKueue (`+serviceAccountUser()+`) tried to delete Job default/h5 (UID `+string(own.UID),
		"refused by ValidatingAdmissionPolicy "+connect.GuardName(multiKueueSA()), "testkit guard:")
}

// TestGuardKeepsAWorkersOwnJob is the reproduction of
// TestForeignUntouchedCatchesKueueDeletingAWorkersOwnJob with the guard on
// (opt-in) and the worker that holds its own Job default/h6 unable to win:
// the deletion is denied and the Job stays. The price, with Kueue v0.17:
// MultiKueue stops at the denied deletion each time it would remove the
// losing worker's objects, so the workload is admitted on the other worker
// but never placed while the Job is there; the time-out names the worker's
// own Job and the denied DELETE, and ForeignUntouched names the attempt.
// That is Kueue before v0.18.2; from v0.18.2 (the fix, #11877, cherry-picked as #12380) there is no
// deletion to deny and the workload is placed.
func TestGuardKeepsAWorkersOwnJob(t *testing.T) {
	ctx := context.Background()
	loser := env.Topo.Workers[0]
	withGuard(t, ctx, loser)
	setStopPolicy(t, ctx, loser, kueue.Hold)
	defer setStopPolicy(t, ctx, loser, kueue.None)
	c := checker(15 * time.Second)
	c.Since = time.Now()
	var wlName string
	t.Cleanup(func() { removeRemoteWorkloads(t, ctx, wlName) })
	own := ownJob(t, ctx, loser, "h6")
	job := workload.NewJob("h6", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(500 * time.Millisecond).Obj()
	submit(t, ctx, job)
	wlName = testtopo.WaitWorkload(ctx, t, env.Topo.Manager, job).Name
	if kueueFixed(t, fixedForeignJobs, "kubernetes-sigs/kueue#11849 (MultiKueue deletes a worker's own Job of the manager Job's name), fixed by #11877 and its cherry-pick #12380") {
		// No deletion to deny: the workload is placed on the other worker
		// and the loser's Job stays as it was.
		c.Timeout = 2 * time.Minute
		a := assert.For(t, c)
		a.ExactlyOnceAdmitted(ctx, job)
		a.Finished(ctx, job)
		if err := sameJob(ctx, loser, own); err != nil {
			t.Error(err)
		}
		if err := c.ForeignUntouched(ctx); err != nil {
			t.Errorf("with the guard on: %v", err)
		}
		return
	}
	guardDenied(t, ctx, loser, "h6", c.Since)
	err := c.ExactlyOnceAdmitted(ctx, job)
	testtopo.FailsNaming(t, err, "ExactlyOnceAdmitted failed", wlName, "has no status.clusterName yet",
		`what holds it: cluster "`+loser.Name+`" holds its own Job default/h6 (UID `+string(own.UID),
		`what holds it: cluster "`+loser.Name+`" refused`, "delete jobs.batch default/h6 by "+serviceAccountUser(),
		"refused by ValidatingAdmissionPolicy "+connect.GuardName(multiKueueSA()))
	if err := sameJob(ctx, loser, own); err != nil {
		t.Error(err)
	}
	testtopo.FailsNaming(t, c.ForeignUntouched(ctx), "ForeignUntouched failed", `cluster "`+loser.Name+`": MultiKueue (`+serviceAccountUser()+`) tried to delete Job default/h6`,
		"refused by ValidatingAdmissionPolicy "+connect.GuardName(multiKueueSA()))
}

// removeRemoteWorkloads deletes the workers' copies of Workload default/name,
// when MultiKueue cannot.
func removeRemoteWorkloads(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if name == "" {
		return
	}
	for _, w := range env.Topo.Workers {
		removeFrom(t, ctx, w, &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
}

// kueueFixed is kueuefix.In for the shared topology.
// fixedForeignJobs is the first release where MultiKueue deletes only the
// remote Jobs it owns: #11877 is in v0.19.0, its cherry-pick #12380 in
// v0.18.2 (CHANGELOG-0.18; `mktk matrix` measured v0.18.4 fixed, where the
// library first expected v0.19.0).
const fixedForeignJobs = "v0.18.2"

func kueueFixed(t *testing.T, fixedIn, what string) bool {
	t.Helper()
	return kueuefix.In(t, env.Topo.Facts, fixedIn, what)
}

func serviceAccountUser() string {
	return "system:serviceaccount:" + multiKueueSA().Namespace + ":" + multiKueueSA().Name
}

// guardDenied waits until worker w's audit log (the local topology keeps
// one per API server) records MultiKueue's deletion of Job default/<name>
// refused by the guard, received at or after since: Kueue's attempt, which changes nothing and so leaves
// no trace in the Observer's history. It fails the test, saying Kueue was
// fixed, if there is none.
func guardDenied(t *testing.T, ctx context.Context, w *topology.Cluster, name string, since time.Time) {
	t.Helper()
	p, ok := env.Topo.Provider().(*local.Provider)
	if !ok {
		t.Fatalf("provider %T: want the local one", env.Topo.Provider())
	}
	path := filepath.Join(p.Dir(), w.Name, "audit.log")
	type auditEvent struct {
		Received time.Time `json:"requestReceivedTimestamp"`
		Verb     string    `json:"verb"`
		User     struct {
			Username string `json:"username"`
		} `json:"user"`
		ObjectRef struct {
			Resource, Namespace, Name string
		} `json:"objectRef"`
		ResponseStatus struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"responseStatus"`
	}
	err := poll.Until(ctx, 30*time.Second, fmt.Sprintf("cluster %q: an audited delete of Job default/%s by %s, denied by the guard", w.Name, name, serviceAccountUser()), func(context.Context) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			var e auditEvent
			if json.Unmarshal([]byte(line), &e) != nil {
				continue
			}
			if !e.Received.Before(since) && e.Verb == "delete" && e.User.Username == serviceAccountUser() && e.ObjectRef.Resource == "jobs" && e.ObjectRef.Namespace == "default" &&
				e.ObjectRef.Name == name && e.ResponseStatus.Code == 403 && strings.Contains(e.ResponseStatus.Message, "testkit guard:") {
				t.Logf("cluster %q audit: %s %s jobs default/%s -> %d %s", w.Name, e.User.Username, e.Verb, name, e.ResponseStatus.Code, e.ResponseStatus.Message)
				return nil
			}
		}
		return errors.New("none yet")
	})
	if err != nil {
		t.Fatalf("%v: Kueue no longer tries to delete the worker's own Job (kueue#11849 fixed?), turn this test around", err)
	}
}
