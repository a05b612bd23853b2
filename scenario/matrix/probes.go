package matrix

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/kobj"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

// The finding probes: each builds, on a real topology, the situation a
// known Kueue defect needs, and returns nil when MultiKueue behaved right
// (the defect did not show) or the assertion's failure naming it. Each
// removes what it created.

// probeForeignSameNameJob (kueue #11849): the first worker's queue is held,
// so it loses every workload; it has its own running Job (no queue, no
// MultiKueue label) with the name of a manager Job submitted next. Once the
// manager's Job finished on another worker, ForeignUntouched must pass and
// the worker's Job be the same object.
func probeForeignSameNameJob(ctx context.Context, env *scenario.Env) (err error) {
	const name = "mx-foreign"
	ns, queue := env.Topo.Spec.Queues.Namespaces[0], env.Topo.Spec.Queues.LocalQueue
	w := env.Topo.Workers[0]
	if len(env.Topo.Workers) < 2 {
		return &InapplicableError{Why: "needs two workers: one to lose, one to run the Job"}
	}
	if err := setStopPolicy(ctx, env.Topo, w, kueue.Hold); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, setStopPolicy(ctx, env.Topo, w, kueue.None)) }()
	own := workload.NewJob(name, ns).RunFor(time.Hour).Obj()
	own.Spec.Suspend = nil
	if err := w.Client.Create(ctx, own); err != nil {
		return fmt.Errorf("cluster %q: create the worker's own Job %s/%s: %w", w.Name, ns, name, err)
	}
	defer func() { err = errors.Join(err, kobj.Remove(ctx, w, own)) }()
	if err := seen(ctx, env, w.Name, own, observe.JobStarted); err != nil {
		return err
	}
	c := *env.Check
	c.Since = time.Now()
	job := workload.NewJob(name, ns).Queue(queue).Requests("1", "1Gi").RunFor(500 * time.Millisecond).Obj()
	if err := env.Topo.Manager.Client.Create(ctx, job); err != nil {
		return fmt.Errorf("cluster %q: create Job %s/%s: %w", env.Topo.Manager.Name, ns, name, err)
	}
	defer func() { err = errors.Join(err, kobj.Remove(ctx, env.Topo.Manager, job)) }()
	if err := c.Finished(ctx, job); err != nil {
		return err
	}
	// MultiKueue deletes by name before it dispatches and again once the
	// workload finished: by now the defect had every chance to show.
	return errors.Join(c.ForeignUntouched(ctx), sameObject(ctx, w, own))
}

// probeFinalStatusWhileSuspended (kueue #11867): a ValidatingAdmissionPolicy
// on the manager holds back the unsuspend of the manager's Job, as a slow or
// restarting manager would, while the remote Job runs and succeeds. Once the
// manager's Workload finished, StatusSynced must pass: the manager's Job
// shows the remote's final status.
func probeFinalStatusWhileSuspended(ctx context.Context, env *scenario.Env) (err error) {
	const name, policy = "mx-held", "mktk-matrix-hold-unsuspend"
	const holdLabel = "testkit.multikueue.x-k8s.io/hold-unsuspend"
	mgr := env.Topo.Manager
	ns, queue := env.Topo.Spec.Queues.Namespaces[0], env.Topo.Spec.Queues.LocalQueue
	msg := "the matrix holds this Job suspended"
	lift, err := kobj.Deny(ctx, mgr, policy, []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
		fmt.Sprintf("has(object.metadata.labels) && %q in object.metadata.labels", holdLabel),
		"!(oldObject.spec.suspend == true && object.spec.suspend == false)", msg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, lift()) }()
	// The API server enforces a new policy once its informer has it: probe
	// with a dry-run unsuspend of a Job no queue takes.
	probe := workload.NewJob(name+"-probe", ns).Label(holdLabel, "true").Obj()
	if err := mgr.Client.Create(ctx, probe); err != nil {
		return fmt.Errorf("cluster %q: create Job %s/%s: %w", mgr.Name, ns, probe.Name, err)
	}
	defer func() { err = errors.Join(err, kobj.Remove(ctx, mgr, probe)) }()
	err = poll.Until(ctx, 30*time.Second, fmt.Sprintf("cluster %q: the policy %s to deny unsuspending Job %s/%s", mgr.Name, policy, ns, probe.Name), func(ctx context.Context) error {
		p := &batchv1.Job{}
		if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(probe), p); err != nil {
			return err
		}
		p.Spec.Suspend = ptr.To(false)
		if err := mgr.Client.Update(ctx, p, client.DryRunAll); err != nil && strings.Contains(err.Error(), msg) {
			return nil
		} else {
			return fmt.Errorf("not enforced yet (update: %v)", err)
		}
	})
	if err != nil {
		return err
	}
	job := workload.NewJob(name, ns).Queue(queue).Requests("1", "1Gi").RunFor(500*time.Millisecond).Label(holdLabel, "true").Obj()
	if err := mgr.Client.Create(ctx, job); err != nil {
		return fmt.Errorf("cluster %q: create Job %s/%s: %w", mgr.Name, ns, name, err)
	}
	defer func() { err = errors.Join(err, kobj.Remove(ctx, mgr, job)) }()
	if err := seenRemote(ctx, env, job, observe.JobSucceeded); err != nil {
		return err
	}
	c := *env.Check
	if err := c.Finished(ctx, job); err != nil {
		return err
	}
	// Fixed, the status arrives within seconds; the defect never sends it.
	c.Timeout = 30 * time.Second
	return c.StatusSynced(ctx, job)
}

// probeMergePatchedNominations: the External scenario whose nominator
// merge-patches status.nominatedClusterNames (scenario.NominateWithMergePatch):
// MultiKueue's server-side apply that records the placement was refused
// by v0.17 ("clusterName and nominatedClusterNames are mutually exclusive").
// The Checker waits 10 s with nothing progressing: the defect never ends.
func probeMergePatchedNominations(ctx context.Context, env *scenario.Env) error {
	c := *env.Check
	c.Timeout = 10 * time.Second
	short := &scenario.Env{Topo: env.Topo, Obs: env.Obs, Check: &c}
	res, err := scenario.External(ctx, short, scenario.ExternalOptions{
		Dispatch: scenario.DispatchOptions{Jobs: 1, NamePrefix: "mx-ext-merge"},
		Write:    scenario.NominateWithMergePatch,
	})
	for _, o := range res.Objects {
		err = errors.Join(err, kobj.Remove(ctx, env.Topo.Manager, o))
	}
	return err
}

// setStopPolicy sets the stop policy of cluster cl's ClusterQueue and waits
// until its Active condition follows.
func setStopPolicy(ctx context.Context, topo *topology.Topology, cl *topology.Cluster, p kueue.StopPolicy) error {
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: topo.Spec.Queues.ClusterQueue}}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(cq), cq); err != nil {
			return err
		}
		cq.Spec.StopPolicy = ptr.To(p)
		return cl.Client.Update(ctx, cq)
	})
	if err != nil {
		return fmt.Errorf("cluster %q: set ClusterQueue %s's stopPolicy to %s: %w", cl.Name, cq.Name, p, err)
	}
	want := p == kueue.None
	return poll.Until(ctx, 30*time.Second, fmt.Sprintf("cluster %q: ClusterQueue %s to be Active=%t", cl.Name, cq.Name, want), func(ctx context.Context) error {
		if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(cq), cq); err != nil {
			return err
		}
		if apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive) != want {
			return errors.New("not yet")
		}
		return nil
	})
}

// seen waits until the Observer recorded event t of job object obj on
// cluster.
func seen(ctx context.Context, env *scenario.Env, cluster string, obj client.Object, t observe.Type) error {
	kind, _ := observe.JobKindOf(obj)
	return poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: %s %s/%s to be %s", cluster, kind, obj.GetNamespace(), obj.GetName(), t), func(context.Context) error {
		evs, _ := env.Obs.History(kind, obj.GetNamespace(), obj.GetName())
		for _, e := range evs {
			if e.Cluster == cluster && e.Type == t {
				return nil
			}
		}
		return errors.New("not yet")
	})
}

// seenRemote waits until the Observer recorded event t of a remote copy of
// job object obj on any worker.
func seenRemote(ctx context.Context, env *scenario.Env, obj client.Object, t observe.Type) error {
	kind, _ := observe.JobKindOf(obj)
	mgr := env.Topo.Manager.Name
	return poll.Until(ctx, 2*time.Minute, fmt.Sprintf("a remote copy of %s %s/%s to be %s on a worker", kind, obj.GetNamespace(), obj.GetName(), t), func(context.Context) error {
		evs, _ := env.Obs.History(kind, obj.GetNamespace(), obj.GetName())
		for _, e := range evs {
			if e.Cluster != mgr && e.Type == t {
				return nil
			}
		}
		return errors.New("not yet")
	})
}

// sameObject reports whether cl still has the very object obj (same UID),
// not being deleted.
func sameObject(ctx context.Context, cl *topology.Cluster, obj client.Object) error {
	cur := obj.DeepCopyObject().(client.Object)
	if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return fmt.Errorf("cluster %q: the worker's own %T %s/%s: %w", cl.Name, obj, obj.GetNamespace(), obj.GetName(), err)
	}
	if cur.GetUID() != obj.GetUID() || cur.GetDeletionTimestamp() != nil {
		return fmt.Errorf("cluster %q: %s/%s is UID %s (deletion %v), want the worker's own %s untouched", cl.Name, obj.GetNamespace(), obj.GetName(), cur.GetUID(), cur.GetDeletionTimestamp(), obj.GetUID())
	}
	return nil
}

// probeIncrementalConfigOrder (Kueue v0.19.0, gate
// MultiKueueIncrementalDispatcherRespectConfigOrder): the incremental setup
// lists its workers out of name order in MultiKueueConfig.spec.clusters, so
// the first round by that order and the first round by name differ. It
// submits one Job and compares the manager Workload's first nomination with
// both, as read from the manager: the spec.clusters order passes; by name,
// or anything else, fails naming what was nominated.
func probeIncrementalConfigOrder(ctx context.Context, env *scenario.Env) (err error) {
	const name = "mx-order"
	mgr := env.Topo.Manager
	ns, queue := env.Topo.Spec.Queues.Namespaces[0], env.Topo.Spec.Queues.LocalQueue
	var cfg kueue.MultiKueueConfig
	if err := mgr.Client.Get(ctx, client.ObjectKey{Name: env.Topo.Spec.Queues.MultiKueueConfig}, &cfg); err != nil {
		return fmt.Errorf("cluster %q: read MultiKueueConfig %s: %w", mgr.Name, env.Topo.Spec.Queues.MultiKueueConfig, err)
	}
	for _, c := range cfg.Spec.Clusters {
		var mkc kueue.MultiKueueCluster
		if err := mgr.Client.Get(ctx, client.ObjectKey{Name: c}, &mkc); err != nil {
			return fmt.Errorf("cluster %q: read MultiKueueCluster %s: %w", mgr.Name, c, err)
		}
		if !apimeta.IsStatusConditionTrue(mkc.Status.Conditions, kueue.MultiKueueClusterActive) {
			return fmt.Errorf("cluster %q: MultiKueueCluster %s is not Active: the first round cannot be judged", mgr.Name, c)
		}
	}
	step := 3 // Kueue's default step size; the setup does not set one
	if len(cfg.Spec.Clusters) <= step {
		return &InapplicableError{Why: fmt.Sprintf("MultiKueueConfig %s lists %d clusters: a first round of %d takes them all", cfg.Name, len(cfg.Spec.Clusters), step)}
	}
	byOrder := slices.Sorted(slices.Values(cfg.Spec.Clusters[:step]))
	byName := slices.Sorted(slices.Values(cfg.Spec.Clusters))[:step]
	if slices.Equal(byOrder, byName) {
		return &InapplicableError{Why: fmt.Sprintf("MultiKueueConfig %s lists %v: its first %d are also the first by name", cfg.Name, cfg.Spec.Clusters, step)}
	}
	job := workload.NewJob(name, ns).Queue(queue).Requests("1", "1Gi").RunFor(500 * time.Millisecond).Obj()
	if err := mgr.Client.Create(ctx, job); err != nil {
		return fmt.Errorf("cluster %q: create Job %s/%s: %w", mgr.Name, ns, name, err)
	}
	defer func() { err = errors.Join(err, kobj.Remove(ctx, mgr, job)) }()
	var first []string
	what := fmt.Sprintf("cluster %q: the first nomination of Job %s/%s's Workload", mgr.Name, ns, name)
	if err := poll.Until(ctx, 2*time.Minute, what, func(ctx context.Context) error {
		wl, err := ownedWorkload(ctx, mgr, job)
		if err != nil {
			return err
		}
		evs, _ := env.Obs.History(observe.KindWorkload, ns, wl.Name)
		for _, e := range evs {
			if e.Cluster == mgr.Name && e.Type == observe.Nominated && len(e.Values) > 0 {
				first = slices.Sorted(slices.Values(e.Values))
				return nil
			}
		}
		return errors.New("its Workload " + wl.Name + " not nominated yet")
	}); err != nil {
		return err
	}
	if slices.Equal(first, byOrder) {
		return env.Check.Finished(ctx, job)
	}
	how := "neither"
	if slices.Equal(first, byName) {
		how = "the first by name"
	}
	return fmt.Errorf("%s is [%s]: %s, want the first %d of MultiKueueConfig %s spec.clusters %v, [%s] (by name it would be [%s])",
		what, strings.Join(first, ","), how, step, cfg.Name, cfg.Spec.Clusters, strings.Join(byOrder, ","), strings.Join(byName, ","))
}

// outOfSync builds what both OutOfSync probes need: a manager Job
// (parallelism 2, 15 s) placed on a worker, then its remote copy's
// parallelism changed there, so that the worker's Kueue finds the copy out
// of sync with its prebuilt Workload and finishes that Workload with reason
// OutOfSync. With started, the change waits until the manager's Job shows
// the remote's running status (active pods). It returns the manager's Job,
// the worker and a cleanup; the history shows whether the OutOfSync finish
// happened (outOfSyncSeen).
func outOfSync(ctx context.Context, env *scenario.Env, name string, started bool) (job *batchv1.Job, w *topology.Cluster, cleanup func() error, err error) {
	mgr := env.Topo.Manager
	ns, queue := env.Topo.Spec.Queues.Namespaces[0], env.Topo.Spec.Queues.LocalQueue
	job = workload.NewJob(name, ns).Queue(queue).Parallelism(2).Completions(2).Requests("500m", "256Mi").RunFor(15 * time.Second).Obj()
	if err := mgr.Client.Create(ctx, job); err != nil {
		return nil, nil, nil, fmt.Errorf("cluster %q: create Job %s/%s: %w", mgr.Name, ns, name, err)
	}
	cleanup = func() error { return kobj.Remove(ctx, mgr, job) }
	var placedOn string
	if err := poll.Until(ctx, 2*time.Minute, fmt.Sprintf("cluster %q: Job %s/%s's Workload placed (status.clusterName)", mgr.Name, ns, name), func(ctx context.Context) error {
		wl, err := ownedWorkload(ctx, mgr, job)
		if err != nil {
			return err
		}
		if placedOn = ptr.Deref(wl.Status.ClusterName, ""); placedOn == "" {
			return errors.New("no clusterName yet")
		}
		return nil
	}); err != nil {
		return nil, nil, nil, errors.Join(err, cleanup())
	}
	if w = env.Topo.Worker(placedOn); w == nil {
		return nil, nil, nil, errors.Join(fmt.Errorf("cluster %q: Job %s/%s placed on %q, which is not a worker of the topology", mgr.Name, ns, name, placedOn), cleanup())
	}
	if started {
		if err := poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: Job %s/%s to show the remote's active pods", mgr.Name, ns, name), func(ctx context.Context) error {
			cur := &batchv1.Job{}
			if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(job), cur); err != nil {
				return err
			}
			if cur.Status.Active == 0 {
				return errors.New("status.active is 0")
			}
			return nil
		}); err != nil {
			return nil, nil, nil, errors.Join(err, cleanup())
		}
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		remote := &batchv1.Job{}
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(job), remote); err != nil {
			return err
		}
		remote.Spec.Parallelism = ptr.To[int32](1)
		return w.Client.Update(ctx, remote)
	}); err != nil {
		return nil, nil, nil, errors.Join(fmt.Errorf("cluster %q: set the remote Job %s/%s's parallelism to 1: %w", w.Name, ns, name, err), cleanup())
	}
	return job, w, cleanup, nil
}

// outOfSyncSeen waits (up to a minute) until the history shows worker w's
// Kueue finishing the copy of job's Workload OutOfSync; an error, an
// infrastructure one, says the probe did not build its situation.
func outOfSyncSeen(ctx context.Context, env *scenario.Env, job client.Object, w *topology.Cluster) (wlName string, err error) {
	mgr := env.Topo.Manager
	err = poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: the copy of Job %s/%s's Workload Finished OutOfSync", w.Name, job.GetNamespace(), job.GetName()), func(ctx context.Context) error {
		wl, err := ownedWorkload(ctx, mgr, job)
		if err != nil {
			return err
		}
		wlName = wl.Name
		if evs, _ := env.Obs.History(observe.KindWorkload, job.GetNamespace(), wl.Name); !firstOutOfSync(evs, w.Name).IsZero() {
			return nil
		}
		return errors.New("not recorded")
	})
	if err != nil {
		return wlName, &scenario.InfraError{Cluster: w.Name, Op: "make Kueue finish a Workload OutOfSync by changing its Job's parallelism", Err: fmt.Errorf("the probe did not build its situation: %w", err)}
	}
	return wlName, nil
}

// probeOutOfSyncRemoteFinish (kueue #13047, fixed in v0.19.0 and by its
// cherry-pick #13086 in v0.18.4): the worker's Kueue finishes the remote
// Workload OutOfSync (outOfSync, changed at once after placement).
// MultiKueue must take that for a sync failure and dispatch again (its
// check back to Retry or Pending); the defect mirrors it as the end of the
// Job: the manager Workload Finished OutOfSync, the manager's Job stranded.
// It judges MultiKueue's reaction only; whether the Job then runs to its
// end is the next probe's question.
func probeOutOfSyncRemoteFinish(ctx context.Context, env *scenario.Env) (err error) {
	mgr := env.Topo.Manager
	job, w, cleanup, err := outOfSync(ctx, env, "mx-outofsync", false)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	wlName, err := outOfSyncSeen(ctx, env, job, w)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("cluster %q: Workload %s/%s after its copy on %q finished OutOfSync", mgr.Name, job.Namespace, wlName, w.Name)
	var finished error
	if err := poll.Until(ctx, time.Minute, what+" to be dispatched again (check multikueue Retry or Pending)", func(ctx context.Context) error {
		wl, err := ownedWorkload(ctx, mgr, job)
		if err != nil {
			return err
		}
		if f := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished); f != nil && f.Status == metav1.ConditionTrue {
			finished = fmt.Errorf("%s: Finished with reason %s (%q): MultiKueue took the remote's sync failure for the end of Job %s/%s, whose status it then never gets; want a new dispatch (kueue #13047)",
				what, f.Reason, f.Message, job.Namespace, job.Name)
			return nil
		}
		evs, _ := env.Obs.History(observe.KindWorkload, job.Namespace, wlName)
		since := firstOutOfSync(evs, w.Name)
		for _, e := range evs {
			if e.Cluster == mgr.Name && e.Type == observe.CheckState && len(e.Values) == 2 && !e.Time.Before(since) &&
				(e.Values[1] == string(kueue.CheckStateRetry) || e.Values[1] == string(kueue.CheckStatePending)) {
				return nil
			}
		}
		return errors.New("its check not reset yet")
	}); err != nil {
		return err
	}
	return finished
}

// probeRedispatchAfterStarted: the same OutOfSync finish, built once the
// manager's Job shows the remote's active pods (MultiKueue copied the
// running status). MultiKueue dispatches again; the Job must then run to
// its end on a worker with its status synced. Seen: on v0.19.2 the API
// server refuses (422) every patch of the manager Job's pod template by
// which Kueue would stop it, its status still counting the removed copy's
// pods; on v0.17.1 every status patch (status.startTime is immutable for an
// unsuspended Job once set). Either way it is never dispatched again.
func probeRedispatchAfterStarted(ctx context.Context, env *scenario.Env) (err error) {
	job, w, cleanup, err := outOfSync(ctx, env, "mx-restarted", true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	if _, err := outOfSyncSeen(ctx, env, job, w); err != nil {
		return err
	}
	c := *env.Check
	if err := c.Finished(ctx, job); err != nil {
		cur := &batchv1.Job{}
		if gerr := env.Topo.Manager.Client.Get(ctx, client.ObjectKeyFromObject(job), cur); gerr == nil {
			err = fmt.Errorf("%w\n  cluster %q: Job %s/%s as it is now: suspend %t, status.active %d, status.startTime set %t (the status is the removed copy's, as MultiKueue copied it)",
				err, env.Topo.Manager.Name, cur.Namespace, cur.Name, ptr.Deref(cur.Spec.Suspend, false), cur.Status.Active, cur.Status.StartTime != nil)
		}
		return err
	}
	return c.StatusSynced(ctx, job)
}

// firstOutOfSync is when cluster's copy first finished OutOfSync in evs;
// zero if it did not.
func firstOutOfSync(evs []observe.Event, cluster string) time.Time {
	for _, e := range evs {
		if e.Cluster == cluster && e.Type == observe.Finished && e.Detail == kueue.WorkloadFinishedReasonOutOfSync {
			return e.Time
		}
	}
	return time.Time{}
}

// ownedWorkload is the Workload on cl that job controls.
func ownedWorkload(ctx context.Context, cl *topology.Cluster, job client.Object) (*kueue.Workload, error) {
	var wls kueue.WorkloadList
	if err := cl.Client.List(ctx, &wls, client.InNamespace(job.GetNamespace())); err != nil {
		return nil, fmt.Errorf("cluster %q: list Workloads in %s: %w", cl.Name, job.GetNamespace(), err)
	}
	for i := range wls.Items {
		if metav1.IsControlledBy(&wls.Items[i], job) {
			return &wls.Items[i], nil
		}
	}
	return nil, fmt.Errorf("cluster %q: no Workload of %s/%s yet", cl.Name, job.GetNamespace(), job.GetName())
}
