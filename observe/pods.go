package observe

import (
	"fmt"

	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
)

// KindPod is a worker's pod of a job object the Observer records (a Job's,
// a JobSet's child Jobs', a RayJob's): where it was bound and how it ran.
const KindPod Kind = "Pod"

// Pod transitions.
const (
	// PodBound: spec.nodeName set; Detail and Values[0] name the Node.
	PodBound Type = "Bound"
	// PodPhase: status.phase changed; Detail is the phase, with the exit
	// code of a terminated container, e.g. "Failed (exit code 1)".
	PodPhase Type = "Phase"
)

// Labels that tie a pod to its job object: the Job controller's, JobSet's
// (on every pod of its child Jobs) and KubeRay's (utils.RayOriginatedFrom*
// in ray-operator/controllers/ray/utils; the constants live in a package
// too heavy to import for two strings).
const (
	rayOriginatedFromCRName = "ray.io/originated-from-cr-name"
	rayOriginatedFromCRD    = "ray.io/originated-from-crd"
	// rayClusterLabel names the RayCluster on each of its pods
	// (utils.RayClusterLabelKey).
	rayClusterLabel = "ray.io/cluster"
)

// kubeflowOperator maps a training-operator controller's name, or the MPI
// operator's (its pods' OperatorNameLabel, on an MPIJob's launcher and
// workers alike), to the job kind it runs.
func kubeflowOperator(name string) (Kind, bool) {
	switch name {
	case "pytorchjob-controller":
		return KindPyTorchJob, true
	case "tfjob-controller":
		return KindTFJob, true
	case "xgboostjob-controller":
		return KindXGBoostJob, true
	case "paddlejob-controller":
		return KindPaddleJob, true
	case "jaxjob-controller":
		return KindJAXJob, true
	case "mpi-operator":
		return KindMPIJob, true
	}
	return "", false
}

// podOwner is the job object a pod runs for, by its labels: a JobSet's
// before its child Job's, a StatefulSet's by its controller reference; ok
// false for a pod of no recorded kind (a Deployment's, a DaemonSet's), which
// the Observer leaves out.
func podOwner(p *corev1.Pod) (kind Kind, name string, ok bool) {
	l := p.Labels
	if n := l[jobset.JobSetNameKey]; n != "" {
		return KindJobSet, n, true
	}
	if n := l[rayOriginatedFromCRName]; n != "" && l[rayOriginatedFromCRD] == string(KindRayJob) {
		return KindRayJob, n, true
	}
	if n := l[rayClusterLabel]; n != "" && (l[rayOriginatedFromCRD] == "" || l[rayOriginatedFromCRD] == string(KindRayCluster)) {
		return KindRayCluster, n, true
	}
	if n := l[awv1beta2.AppWrapperLabel]; n != "" {
		return KindAppWrapper, n, true
	}
	if n := l[kftraining.JobNameLabel]; n != "" {
		if k, ok := kubeflowOperator(l[kftraining.OperatorNameLabel]); ok {
			return k, n, true
		}
	}
	if n := l[lwsv1.SetNameLabelKey]; n != "" {
		return KindLeaderWorkerSet, n, true
	}
	if n := l[batchv1.JobNameLabel]; n != "" {
		return KindJob, n, true
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == string(KindStatefulSet) && ref.APIVersion == "apps/v1" {
		return KindStatefulSet, ref.Name, true
	}
	return "", "", false
}

// slimPod is the Observer's cache transform of pods: what podOwner and
// podSnapshot read (metadata without managed fields, the Node, the phase
// and containers' states), not the pod's spec.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	slim.ManagedFields = nil
	slim.Spec.NodeName = p.Spec.NodeName
	slim.Status.Phase = p.Status.Phase
	slim.Status.ContainerStatuses = p.Status.ContainerStatuses
	return slim, nil
}

// PodsUnread returns why worker's pods are not recorded (its credentials
// could not list them when the Observer started), or nil when they are.
func (o *Observer) PodsUnread(worker string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.podsUnread[worker]
}

// podSnapshot keeps a pod's node and phase (with exit codes).
func podSnapshot(p *corev1.Pod) *snapshot {
	s := &snapshot{uid: p.UID, flags: map[Type]bool{DeletionRequested: !p.DeletionTimestamp.IsZero()}, reason: map[Type]string{}}
	s.clusterName = p.Spec.NodeName
	s.jobStatus = string(p.Status.Phase)
	if s.jobStatus == "" {
		s.jobStatus = string(corev1.PodPending)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			s.jobStatus += fmt.Sprintf(" (exit code %d)", t.ExitCode)
			break
		}
	}
	return s
}

// podTransitions are the pod part of diff.
func podTransitions(prev, cur *snapshot, add func(Type, string, []string)) {
	if cur.clusterName != prev.clusterName && cur.clusterName != "" {
		add(PodBound, cur.clusterName, []string{cur.clusterName})
	}
	// A new pod is Pending: its Created says so.
	if cur.jobStatus != prev.jobStatus && (prev.jobStatus != "" || cur.jobStatus != string(corev1.PodPending)) {
		add(PodPhase, cur.jobStatus, []string{cur.jobStatus})
	}
}

// PodHistory returns the transitions of every pod run for the job object of
// kind namespace/name, on every worker, oldest first: where each was bound,
// how it ran, when it went. Pods are tied to their job by labels (see
// KindPod; a TrainJob's are its JobSet's, which has its name); nil when none
// was seen.
func (o *Observer) PodHistory(kind Kind, namespace, name string) []Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	if kind == KindTrainJob {
		kind = KindJobSet
	}
	var out []Event
	for pod := range o.pods[objKey{kind: kind, namespace: namespace, name: name}] {
		if r := o.records[objKey{kind: KindPod, namespace: namespace, name: pod}]; r != nil {
			out = append(out, r.events...)
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int { return a.Time.Compare(b.Time) })
	return out
}
