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
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/multikueue-testkit/testkit/topology"
)

// podRunner plays the kubelet for the pods a worker's real controllers
// create; there is no kubelet and no scheduler, so pods stay unbound, and
// this API server accepts a status update of an unbound pod.
//
//   - A pod controlled by a Job (the real Job controller creates them with
//     Options.RealPods; JobSet's child Jobs and KubeRay's submitter Job
//     included) becomes Running and Ready, then Succeeded (exit code 0) or
//     Failed (exit code 1) after its run duration: the run-duration and
//     outcome annotations of the pod (copied from the Job's pod template),
//     else of the Job.
//   - A pod controlled by a RayCluster (head and workers) becomes Running and
//     Ready and stays so until it is deleted, as a Ray node does.
//
// Other pods are left alone. What is not played: init containers, probes,
// restarts (restartPolicy OnFailure is treated as Never), resource usage.
type podRunner struct {
	cluster string
	client  client.Client
	now     func() time.Time

	// started keeps each running pod's start to the nanosecond, as the
	// executor does (status.startTime is stored to the second).
	mu      sync.Mutex
	started map[types.UID]time.Time
}

// setupPodRunner adds the pod runner to a worker's agent manager.
func setupPodRunner(cluster string, mgr manager.Manager) error {
	r := &podRunner{cluster: cluster, client: mgr.GetClient(), now: time.Now, started: map[types.UID]time.Time{}}
	notDone := predicate.NewPredicateFuncs(func(o client.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
	})
	return ctrl.NewControllerManagedBy(mgr).Named("mktk-pod-runner").
		For(&corev1.Pod{}, builder.WithPredicates(notDone)).Complete(r)
}

// Reconcile advances one pod.
func (r *podRunner) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		r.forget(pod.UID)
		return reconcile.Result{}, nil
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return reconcile.Result{}, nil
	}
	switch {
	case owner.Kind == "Job" && owner.APIVersion == batchv1.SchemeGroupVersion.String():
		return r.runToCompletion(ctx, pod, owner.Name)
	case owner.Kind == "RayCluster":
		if pod.Status.Phase != corev1.PodRunning {
			return reconcile.Result{}, r.setRunning(ctx, pod)
		}
	}
	return reconcile.Result{}, nil
}

// runToCompletion runs a Job's pod: Running, then terminated after its run
// duration.
func (r *podRunner) runToCompletion(ctx context.Context, pod *corev1.Pod, jobName string) (reconcile.Result, error) {
	job := &batchv1.Job{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: jobName}, job); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	dur, outcome, err := runSpec(pod.Annotations, job.Annotations)
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("cluster %q: Pod %s/%s: %w", r.cluster, pod.Namespace, pod.Name, err))
	}
	if pod.Status.Phase != corev1.PodRunning {
		if err := r.setRunning(ctx, pod); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: dur}, nil
	}
	if left := r.startOf(pod).Add(dur).Sub(r.now()); left > 0 {
		return reconcile.Result{RequeueAfter: left}, nil
	}
	return reconcile.Result{}, r.terminate(ctx, pod, outcome)
}

func (r *podRunner) startOf(pod *corev1.Pod) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.started[pod.UID]; ok {
		return t
	}
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return r.now()
}

func (r *podRunner) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.started, uid)
}

// setRunning makes every container of pod running and the pod Ready.
func (r *podRunner) setRunning(ctx context.Context, pod *corev1.Pod) error {
	now := r.now()
	t := metav1.Time{Time: now}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &t
	pod.Status.Conditions = podConditions(t, corev1.ConditionTrue)
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}},
		})
	}
	if err := r.updateStatus(ctx, pod); err != nil {
		return err
	}
	r.mu.Lock()
	r.started[pod.UID] = now
	r.mu.Unlock()
	return nil
}

// terminate ends every container with exit code 0 (Succeeded) or 1 (Failed).
func (r *podRunner) terminate(ctx context.Context, pod *corev1.Pod, outcome string) error {
	t := metav1.Time{Time: r.now()}
	phase, code, reason := corev1.PodSucceeded, int32(0), "Completed"
	if outcome == topology.OutcomeFailed {
		phase, code, reason = corev1.PodFailed, 1, "Error"
	}
	started := metav1.Time{Time: r.startOf(pod)}
	pod.Status.Phase = phase
	pod.Status.Conditions = podConditions(t, corev1.ConditionFalse)
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		cs.Ready, cs.Started = false, ptr.To(false)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: t}}
	}
	if err := r.updateStatus(ctx, pod); err != nil {
		return err
	}
	r.forget(pod.UID)
	return nil
}

func (r *podRunner) updateStatus(ctx context.Context, pod *corev1.Pod) error {
	if err := r.client.Status().Update(ctx, pod); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // a newer version is on its way to us
		}
		return fmt.Errorf("cluster %q: update status of Pod %s/%s: %w", r.cluster, pod.Namespace, pod.Name, err)
	}
	return nil
}

// podConditions are a started pod's conditions, ready or not.
func podConditions(t metav1.Time, ready corev1.ConditionStatus) []corev1.PodCondition {
	return []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: t},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t},
		{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: t},
		{Type: corev1.PodReady, Status: ready, LastTransitionTime: t},
	}
}
