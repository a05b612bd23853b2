package local

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/multikueue-testkit/testkit/topology"
)

// DefaultRunDuration is how long a Job runs when it has no run-duration
// annotation.
const DefaultRunDuration = time.Second

// jobExecutor plays the Job controller and kubelet for batch/Jobs on a worker:
// an unsuspended Job is marked running, then succeeded or failed after its
// run duration, with the status Kubernetes 1.35 validation requires. It runs in
// the agent's manager, so stopping a cluster's Kueue leaves running Jobs
// running, as on a real cluster. With Options.RealPods it is off: the real
// Job controller creates pods and the pod runner runs them.
type jobExecutor struct {
	cluster string
	client  client.Client
	now     func() time.Time

	// started keeps each running Job's start to the nanosecond:
	// status.startTime is stored to the second, which would end a 500 ms
	// run at once when it started late in a second. After a restart of the
	// executor it falls back to status.startTime.
	mu      sync.Mutex
	started map[types.NamespacedName]start
}

type start struct {
	uid types.UID
	at  time.Time
}

// startOf returns the precise start of job, or its status.startTime.
func (e *jobExecutor) startOf(job *batchv1.Job) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.started[client.ObjectKeyFromObject(job)]; ok && s.uid == job.UID {
		return s.at
	}
	return job.Status.StartTime.Time
}

func (e *jobExecutor) setStart(key types.NamespacedName, s *start) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s == nil {
		delete(e.started, key)
		return
	}
	e.started[key] = *s
}

const jobControllerManagedBy = "kubernetes.io/job-controller"

// setupJobExecutor adds the Job executor to a worker's agent manager.
func setupJobExecutor(cluster string, mgr manager.Manager) error {
	ex := &jobExecutor{cluster: cluster, client: mgr.GetClient(), now: time.Now, started: map[types.NamespacedName]start{}}
	return ctrl.NewControllerManagedBy(mgr).Named("mktk-job-executor").For(&batchv1.Job{}).Complete(ex)
}

// Reconcile advances one Job.
func (e *jobExecutor) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &batchv1.Job{}
	if err := e.client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			e.setStart(req.NamespacedName, nil)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if job.Spec.ManagedBy != nil && *job.Spec.ManagedBy != jobControllerManagedBy {
		return reconcile.Result{}, nil // another controller (MultiKueue) owns its status
	}
	if finished(job) || !job.DeletionTimestamp.IsZero() {
		e.setStart(req.NamespacedName, nil)
		return reconcile.Result{}, nil
	}
	if ptr.Deref(job.Spec.Suspend, false) {
		if job.Status.StartTime == nil && job.Status.Active == 0 {
			return reconcile.Result{}, nil
		}
		// Suspended while running (evicted): stop the pods.
		e.setStart(req.NamespacedName, nil)
		job.Status.Active, job.Status.Ready, job.Status.StartTime = 0, ptr.To[int32](0), nil
		return reconcile.Result{}, e.update(ctx, job)
	}
	dur, outcome, err := runSpec(job.Annotations, job.Spec.Template.Annotations)
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("cluster %q: Job %s: %w", e.cluster, req.NamespacedName, err))
	}
	now := e.now()
	if job.Status.StartTime == nil {
		par := ptr.Deref(job.Spec.Parallelism, 1)
		job.Status.StartTime = &metav1.Time{Time: now}
		job.Status.Active, job.Status.Ready = par, ptr.To(par)
		if err := e.update(ctx, job); err != nil {
			return reconcile.Result{}, err
		}
		e.setStart(req.NamespacedName, &start{uid: job.UID, at: now})
		return reconcile.Result{RequeueAfter: dur}, nil
	}
	if left := e.startOf(job).Add(dur).Sub(now); left > 0 {
		return reconcile.Result{RequeueAfter: left}, nil
	}
	t := metav1.Time{Time: now}
	job.Status.Active, job.Status.Ready, job.Status.Terminating = 0, ptr.To[int32](0), ptr.To[int32](0)
	if outcome == topology.OutcomeFailed {
		job.Status.Failed = 1
		job.Status.Conditions = append(job.Status.Conditions,
			condition(batchv1.JobFailureTarget, "BackoffLimitExceeded", "Job has reached the specified backoff limit", t),
			condition(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit", t))
	} else {
		job.Status.Succeeded = ptr.Deref(job.Spec.Completions, ptr.Deref(job.Spec.Parallelism, 1))
		if ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion && job.Status.Succeeded > 0 {
			job.Status.CompletedIndexes = indexRange(job.Status.Succeeded)
		}
		job.Status.CompletionTime = &t
		job.Status.Conditions = append(job.Status.Conditions,
			condition(batchv1.JobSuccessCriteriaMet, "CompletionsReached", "Reached expected number of succeeded pods", t),
			condition(batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods", t))
	}
	return reconcile.Result{}, e.update(ctx, job)
}

func (e *jobExecutor) update(ctx context.Context, job *batchv1.Job) error {
	if err := e.client.Status().Update(ctx, job); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // a newer version is on its way to us
		}
		return fmt.Errorf("cluster %q: update status of Job %s/%s: %w", e.cluster, job.Namespace, job.Name, err)
	}
	return nil
}

// runSpec reads how a Job or pod runs from the run-duration and outcome
// annotations of the first of sources that has each (a Job's own
// annotations, then its pod template's: KubeRay's submitter Job carries them
// only on its pod template).
func runSpec(sources ...map[string]string) (time.Duration, string, error) {
	lookup := func(key string) (string, bool) {
		for _, a := range sources {
			if v, ok := a[key]; ok {
				return v, true
			}
		}
		return "", false
	}
	dur := DefaultRunDuration
	if v, ok := lookup(topology.AnnotationRunDuration); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, "", fmt.Errorf("annotation %s=%q is not a non-negative Go duration", topology.AnnotationRunDuration, v)
		}
		dur = d
	}
	outcome := topology.OutcomeSucceeded
	if v, ok := lookup(topology.AnnotationOutcome); ok {
		if v != topology.OutcomeSucceeded && v != topology.OutcomeFailed {
			return 0, "", fmt.Errorf("annotation %s=%q is neither %s nor %s", topology.AnnotationOutcome, v, topology.OutcomeSucceeded, topology.OutcomeFailed)
		}
		outcome = v
	}
	return dur, outcome, nil
}

// indexRange is the completedIndexes of an Indexed Job whose first n
// indexes succeeded: "0" or "0-<n-1>".
func indexRange(n int32) string {
	if n == 1 {
		return "0"
	}
	return fmt.Sprintf("0-%d", n-1)
}

func finished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func condition(t batchv1.JobConditionType, reason, msg string, at metav1.Time) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastProbeTime: at, LastTransitionTime: at}
}
