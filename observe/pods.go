package observe

import (
	"fmt"

	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
)

// KindPod is a worker's pod of a job object the Observer records (a Job's,
// a JobSet's child Jobs', a RayJob's): where it was bound and how it ran.
// With Kueue's pod integration on, a pod Kueue manages itself (a plain
// Pod, a pod group's, a Deployment's: labelled kueue.x-k8s.io/managed and
// run for no recorded job object) is a job object too, recorded on the
// manager and on the workers with a job's transitions besides a pod's:
// KindPod is then among JobKindsFor's kinds.
const KindPod Kind = "Pod"

// Kueue's pod integration (pkg/constants, pkg/controller/jobs/pod/constants;
// outside Kueue's API, spelled out: TestLabelsAreKueues checks them).
const (
	// LabelManaged marks a pod Kueue's pod integration manages.
	LabelManaged = "kueue.x-k8s.io/managed"
	// LabelPodGroup names a pod's group: one Workload for all its pods.
	LabelPodGroup = "kueue.x-k8s.io/pod-group-name"
	// PodAdmissionGate is the scheduling gate Kueue keeps on a managed pod
	// until its Workload is admitted: on the manager, where MultiKueue
	// runs the pod's copy on a worker, it stays.
	PodAdmissionGate = "kueue.x-k8s.io/admission"
)

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
// before its child Job's, a StatefulSet's by its controller reference, a pod
// Kueue's pod integration manages for none of these its own (KindPod, its
// name); ok false for a pod of no recorded kind (a DaemonSet's, a
// Deployment's that Kueue does not manage), which the Observer leaves out.
func podOwner(p *corev1.Pod) (kind Kind, name string, ok bool) {
	l := p.Labels
	if n := l[jobset.JobSetNameKey]; n != "" {
		return KindJobSet, n, true
	}
	if n := l[rayOriginatedFromCRName]; n != "" && (l[rayOriginatedFromCRD] == string(KindRayJob) || l[rayOriginatedFromCRD] == string(KindRayService)) {
		return Kind(l[rayOriginatedFromCRD]), n, true
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
	if p.Labels[LabelManaged] == "true" {
		return KindPod, p.Name, true
	}
	return "", "", false
}

// podJobState is a managed pod's state as a job object: suspended while
// Kueue's admission gate is on (on the manager, for good), started once it
// runs, finished with its phase; the summary is the phase with the exit
// code of a terminated container, the status MultiKueue copies whole from
// the worker's pod to the manager's.
func podJobState(obj client.Object) JobState {
	p := obj.(*corev1.Pod)
	s := JobState{Started: p.Status.StartTime != nil || p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed}
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == PodAdmissionGate {
			s.Suspended = true
		}
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		s.Succeeded, s.Reason = true, p.Status.Reason
	case corev1.PodFailed:
		s.Failed, s.Reason = true, p.Status.Reason
	}
	s.Summary = podPhase(p)
	return s
}

// podPhase is a pod's phase (Pending when unset) with the exit code of a
// terminated container once it ended: "Failed (exit code 1)".
func podPhase(p *corev1.Pod) string {
	phase := string(p.Status.Phase)
	if phase == "" {
		phase = string(corev1.PodPending)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			return phase + fmt.Sprintf(" (exit code %d)", t.ExitCode)
		}
	}
	return phase
}

// slimPod is the Observer's cache transform of pods: what podOwner,
// podSnapshot and podJobState read (metadata without managed fields, the
// Node, the scheduling gates, the phase, the start time and containers'
// states), not the rest of the pod's spec.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	slim.ManagedFields = nil
	slim.Spec.NodeName = p.Spec.NodeName
	slim.Spec.SchedulingGates = p.Spec.SchedulingGates
	slim.Status.Phase = p.Status.Phase
	slim.Status.Reason = p.Status.Reason
	slim.Status.StartTime = p.Status.StartTime
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

// podSnapshot keeps a pod's node and phase (with exit codes); for a pod
// that is a job object of its own (asJob), also a job's state and the
// labels a copy carries.
func podSnapshot(p *corev1.Pod, asJob bool) *snapshot {
	s := &snapshot{uid: p.UID, flags: map[Type]bool{DeletionRequested: !p.DeletionTimestamp.IsZero()}, reason: map[Type]string{}}
	if asJob {
		s = jobSnapshot(p, podJobState(p))
		s.podJob = true
	}
	s.clusterName = p.Spec.NodeName
	s.jobStatus = podPhase(p)
	return s
}

// podTransitions are the pod part of diff.
func podTransitions(prev, cur *snapshot, add func(Type, string, []string)) {
	if cur.clusterName != prev.clusterName && cur.clusterName != "" {
		add(PodBound, cur.clusterName, []string{cur.clusterName})
	}
	// A new pod is Pending: its Created says so.
	if cur.jobStatus != prev.jobStatus && (prev.jobStatus != "" || cur.jobStatus != string(corev1.PodPending)) && !cur.podJob {
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
