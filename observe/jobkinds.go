package observe

import (
	"fmt"
	"slices"
	"strings"

	kfmpi "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/multikueue-testkit/testkit/topology"
)

// Job kinds the Observer knows. Each is watched when its Kueue integration
// is enabled in the topology (batch/Job always).
const (
	KindJob    Kind = "Job"
	KindJobSet Kind = "JobSet"
	KindRayJob Kind = "RayJob"
	// KubeRay's RayCluster, a serving kind: it runs until it is deleted;
	// MultiKueue copies its status. A RayJob's own RayCluster (on a worker,
	// owned by the RayJob) is recorded too, and is no MultiKueue copy.
	KindRayCluster Kind = "RayCluster"
	// KubeRay's RayService, a serving kind: it runs until it is deleted and
	// is ready once Ray Serve runs its applications; MultiKueue copies its
	// status. Its RayCluster on a worker (owned by it, carrying its labels)
	// is recorded as a RayCluster, and is no MultiKueue copy.
	KindRayService Kind = "RayService"
	// The Kubeflow training-operator's jobs (kubeflow.org/v1).
	KindPyTorchJob Kind = "PyTorchJob"
	KindTFJob      Kind = "TFJob"
	KindXGBoostJob Kind = "XGBoostJob"
	KindPaddleJob  Kind = "PaddleJob"
	KindJAXJob     Kind = "JAXJob"
	// The MPI operator's MPIJob (kubeflow.org/v2beta1).
	KindMPIJob Kind = "MPIJob"
	// The Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1): it
	// runs as a JobSet of its name, whose pods are the TrainJob's (see
	// PodHistory).
	KindTrainJob Kind = "TrainJob"
	// The AppWrapper (workload.codeflare.dev/v1beta2).
	KindAppWrapper Kind = "AppWrapper"
	// The apps/v1 StatefulSet, a serving kind: it never finishes, and
	// MultiKueue does not copy its status to the manager (see
	// StatusNotCopied).
	KindStatefulSet Kind = "StatefulSet"
	// The LeaderWorkerSet (leaderworkerset.x-k8s.io/v1), a serving kind
	// like the StatefulSet; one Workload per group.
	KindLeaderWorkerSet Kind = "LeaderWorkerSet"
)

// StatusNotCopied returns, for a kind whose status MultiKueue does not copy
// from the worker to the manager, why (Kueue's own reason); "" for a kind
// whose status it copies.
func StatusNotCopied(k Kind) string {
	switch k {
	case KindStatefulSet:
		return "a StatefulSet has no spec.managedBy, so the manager's StatefulSet controller owns its status there; Kueue's statefulset MultiKueue adapter creates the copy and never syncs its status back (pkg/controller/jobs/statefulset/statefulset_multikueue_adapter.go)"
	case KindLeaderWorkerSet:
		return "a LeaderWorkerSet has no spec.managedBy, so the manager's LeaderWorkerSet controller owns its status there; Kueue's leaderworkerset MultiKueue adapter creates the copy and never syncs its status back (pkg/controller/jobs/leaderworkerset/leaderworkerset_multikueue_adapter.go)"
	}
	return ""
}

// CopyServesWorkloads reports whether MultiKueue makes one copy of a kind's
// object for several Workloads (a LeaderWorkerSet's, one per group): the
// copy has no prebuilt-workload-name and names the manager's object by its
// UID (AnnotationOriginUID).
func CopyServesWorkloads(k Kind) bool { return k == KindLeaderWorkerSet }

// WorkloadCount returns how many Workloads Kueue makes for a job object as
// read from a cluster: one per group for a LeaderWorkerSet (its
// spec.replicas, 1 when unset, as Kueue defaults it), 1 for every other
// kind.
func WorkloadCount(obj client.Object) int {
	if l, ok := obj.(*lwsv1.LeaderWorkerSet); ok && l.Spec.Replicas != nil {
		return int(*l.Spec.Replicas)
	}
	return 1
}

// NeverFinishes reports whether a kind runs until it is deleted (a serving
// kind): its Workload is never Finished.
func NeverFinishes(k Kind) bool {
	return k == KindStatefulSet || k == KindLeaderWorkerSet || k == KindRayCluster || k == KindRayService
}

// JobState is what the Observer and the assertions read from a job object
// of any known kind.
type JobState struct {
	Suspended bool
	Started   bool
	Succeeded bool
	Failed    bool
	// Reason of the terminal condition, when there is one.
	Reason string
	// Summary is the status that must end identical on the manager and on
	// the worker: counts for a Job, restarts and terminal state for a
	// JobSet, deployment and job status for a RayJob.
	Summary string
}

// Finished reports whether the job succeeded or failed.
func (s JobState) Finished() bool { return s.Succeeded || s.Failed }

type jobKind struct {
	kind        Kind
	integration string
	newObj      func() client.Object
	newList     func() client.ObjectList
	state       func(client.Object) JobState
}

// jobKindTable describes every known job kind.
func jobKindTable() []jobKind {
	return []jobKind{
		{KindJob, topology.IntegrationBatchJob, func() client.Object { return &batchv1.Job{} }, func() client.ObjectList { return &batchv1.JobList{} }, batchJobState},
		{KindJobSet, topology.IntegrationJobSet, func() client.Object { return &jobset.JobSet{} }, func() client.ObjectList { return &jobset.JobSetList{} }, jobSetState},
		{KindRayJob, topology.IntegrationRayJob, func() client.Object { return &rayv1.RayJob{} }, func() client.ObjectList { return &rayv1.RayJobList{} }, rayJobState},
		{KindRayCluster, topology.IntegrationRayCluster, func() client.Object { return &rayv1.RayCluster{} }, func() client.ObjectList { return &rayv1.RayClusterList{} }, rayClusterState},
		{KindRayService, topology.IntegrationRayService, func() client.Object { return &rayv1.RayService{} }, func() client.ObjectList { return &rayv1.RayServiceList{} }, rayServiceState},
		{KindPyTorchJob, topology.IntegrationPyTorchJob, func() client.Object { return &kftraining.PyTorchJob{} }, func() client.ObjectList { return &kftraining.PyTorchJobList{} }, kubeflowState},
		{KindTFJob, topology.IntegrationTFJob, func() client.Object { return &kftraining.TFJob{} }, func() client.ObjectList { return &kftraining.TFJobList{} }, kubeflowState},
		{KindXGBoostJob, topology.IntegrationXGBoostJob, func() client.Object { return &kftraining.XGBoostJob{} }, func() client.ObjectList { return &kftraining.XGBoostJobList{} }, kubeflowState},
		{KindPaddleJob, topology.IntegrationPaddleJob, func() client.Object { return &kftraining.PaddleJob{} }, func() client.ObjectList { return &kftraining.PaddleJobList{} }, kubeflowState},
		{KindMPIJob, topology.IntegrationMPIJob, func() client.Object { return &kfmpi.MPIJob{} }, func() client.ObjectList { return &kfmpi.MPIJobList{} }, mpiJobState},
		{KindTrainJob, topology.IntegrationTrainJob, func() client.Object { return &trainer.TrainJob{} }, func() client.ObjectList { return &trainer.TrainJobList{} }, trainJobState},
		{KindAppWrapper, topology.IntegrationAppWrapper, func() client.Object { return &awv1beta2.AppWrapper{} }, func() client.ObjectList { return &awv1beta2.AppWrapperList{} }, appWrapperState},
		{KindJAXJob, topology.IntegrationJAXJob, func() client.Object { return &kftraining.JAXJob{} }, func() client.ObjectList { return &kftraining.JAXJobList{} }, kubeflowState},
		{KindLeaderWorkerSet, topology.IntegrationLeaderWorkerSet, func() client.Object { return &lwsv1.LeaderWorkerSet{} }, func() client.ObjectList { return &lwsv1.LeaderWorkerSetList{} }, leaderWorkerSetState},
		{KindStatefulSet, topology.IntegrationStatefulSet, func() client.Object { return &appsv1.StatefulSet{} }, func() client.ObjectList { return &appsv1.StatefulSetList{} }, statefulSetState},
		{KindPod, topology.IntegrationPod, func() client.Object { return &corev1.Pod{} }, func() client.ObjectList { return &corev1.PodList{} }, podJobState},
	}
}

// JobKindsFor returns the job kinds watched for the given Kueue
// integrations: batch/Job always, the others with their integration.
func JobKindsFor(integrations []string) []Kind {
	on := map[string]bool{topology.IntegrationBatchJob: true}
	for _, i := range integrations {
		on[i] = true
	}
	var out []Kind
	for _, k := range jobKindTable() {
		if on[k.integration] {
			out = append(out, k.kind)
		}
	}
	return out
}

// KnownJobKinds returns every job kind the Observer can record.
func KnownJobKinds() []Kind {
	var out []Kind
	for _, jk := range jobKindTable() {
		out = append(out, jk.kind)
	}
	return out
}

func lookupKind(k Kind) (jobKind, bool) {
	for _, jk := range jobKindTable() {
		if jk.kind == k {
			return jk, true
		}
	}
	return jobKind{}, false
}

// IsJobKind reports whether k is a job kind the Observer knows.
func IsJobKind(k Kind) bool { _, ok := lookupKind(k); return ok }

// NewJobObject returns an empty object of a job kind, or an error naming
// the kind.
func NewJobObject(k Kind) (client.Object, error) {
	jk, ok := lookupKind(k)
	if !ok {
		return nil, fmt.Errorf("observe: %q is not a job kind the Observer knows", k)
	}
	return jk.newObj(), nil
}

// NewJobList returns an empty list of a job kind, or an error naming it.
func NewJobList(k Kind) (client.ObjectList, error) {
	jk, ok := lookupKind(k)
	if !ok {
		return nil, fmt.Errorf("observe: %q is not a job kind the Observer knows", k)
	}
	return jk.newList(), nil
}

// JobKindOf returns the kind of a job object, false if it is not one.
func JobKindOf(obj client.Object) (Kind, bool) {
	switch obj.(type) {
	case *batchv1.Job:
		return KindJob, true
	case *jobset.JobSet:
		return KindJobSet, true
	case *rayv1.RayJob:
		return KindRayJob, true
	case *rayv1.RayCluster:
		return KindRayCluster, true
	case *rayv1.RayService:
		return KindRayService, true
	case *kftraining.PyTorchJob:
		return KindPyTorchJob, true
	case *kftraining.TFJob:
		return KindTFJob, true
	case *kftraining.XGBoostJob:
		return KindXGBoostJob, true
	case *kftraining.PaddleJob:
		return KindPaddleJob, true
	case *kftraining.JAXJob:
		return KindJAXJob, true
	case *kfmpi.MPIJob:
		return KindMPIJob, true
	case *trainer.TrainJob:
		return KindTrainJob, true
	case *awv1beta2.AppWrapper:
		return KindAppWrapper, true
	case *appsv1.StatefulSet:
		return KindStatefulSet, true
	case *lwsv1.LeaderWorkerSet:
		return KindLeaderWorkerSet, true
	case *corev1.Pod:
		return KindPod, true
	}
	return "", false
}

// JobStateOf reads the state of a job object; false if it is not one.
func JobStateOf(obj client.Object) (JobState, bool) {
	k, ok := JobKindOf(obj)
	if !ok {
		return JobState{}, false
	}
	jk, _ := lookupKind(k)
	return jk.state(obj), true
}

func batchJobState(obj client.Object) JobState {
	job := obj.(*batchv1.Job)
	s := JobState{Suspended: ptr.Deref(job.Spec.Suspend, false), Started: job.Status.StartTime != nil}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			s.Succeeded, s.Reason = true, c.Reason
		case batchv1.JobFailed:
			s.Failed, s.Reason = true, c.Reason
		}
	}
	s.Summary = fmt.Sprintf("active=%d succeeded=%d failed=%d", job.Status.Active, job.Status.Succeeded, job.Status.Failed)
	return s
}

func jobSetState(obj client.Object) JobState {
	js := obj.(*jobset.JobSet)
	s := JobState{Suspended: ptr.Deref(js.Spec.Suspend, false)}
	s.Started = !s.Suspended && len(js.Status.ReplicatedJobsStatus) > 0
	if c := apimeta.FindStatusCondition(js.Status.Conditions, string(jobset.JobSetCompleted)); c != nil && c.Status == metav1.ConditionTrue {
		s.Succeeded, s.Reason = true, c.Reason
	}
	if c := apimeta.FindStatusCondition(js.Status.Conditions, string(jobset.JobSetFailed)); c != nil && c.Status == metav1.ConditionTrue {
		s.Failed, s.Reason = true, c.Reason
	}
	s.Summary = fmt.Sprintf("restarts=%d terminalState=%s", js.Status.Restarts, js.Status.TerminalState)
	return s
}

// rayJobState follows Kueue: a RayJob is finished when its deployment is
// Complete or Failed, and succeeded when its job status is SUCCEEDED.
func rayJobState(obj client.Object) JobState {
	rj := obj.(*rayv1.RayJob)
	s := JobState{Suspended: rj.Spec.Suspend, Started: rj.Status.StartTime != nil}
	if d := rj.Status.JobDeploymentStatus; d == rayv1.JobDeploymentStatusComplete || d == rayv1.JobDeploymentStatusFailed {
		if rj.Status.JobStatus == rayv1.JobStatusSucceeded {
			s.Succeeded = true
		} else {
			s.Failed, s.Reason = true, string(rj.Status.Reason)
		}
	}
	s.Summary = fmt.Sprintf("deployment=%s job=%s", rj.Status.JobDeploymentStatus, rj.Status.JobStatus)
	return s
}

// rayClusterState reads a RayCluster: it has started once KubeRay calls it
// ready, and never finishes; Kueue's MultiKueue adapter copies the worker's
// whole status, so the summary is its state and its worker counts.
func rayClusterState(obj client.Object) JobState {
	rc := obj.(*rayv1.RayCluster)
	s := JobState{Suspended: ptr.Deref(rc.Spec.Suspend, false), Started: rc.Status.State == rayv1.Ready}
	s.Summary = fmt.Sprintf("state=%s readyWorkers=%d desiredWorkers=%d", rc.Status.State, rc.Status.ReadyWorkerReplicas, rc.Status.DesiredWorkerReplicas)
	return s
}

// rayServiceState reads a RayService: suspended while its cluster config
// is (Kueue's suspend), started once KubeRay calls it Ready (Ray Serve runs
// its applications and its serve Service has an endpoint), and it never
// finishes; Kueue's MultiKueue adapter copies the worker's whole status, so
// the summary is its service status, the Ready condition's reason and the
// active cluster's applications.
func rayServiceState(obj client.Object) JobState {
	rs := obj.(*rayv1.RayService)
	ready := apimeta.FindStatusCondition(rs.Status.Conditions, string(rayv1.RayServiceReady))
	s := JobState{Suspended: ptr.Deref(rs.Spec.RayClusterSpec.Suspend, false), Started: ready != nil && ready.Status == metav1.ConditionTrue}
	reason := ""
	if ready != nil {
		reason = ready.Reason
	}
	apps := make([]string, 0, len(rs.Status.ActiveServiceStatus.Applications))
	for name, app := range rs.Status.ActiveServiceStatus.Applications {
		apps = append(apps, name+"="+app.Status)
	}
	slices.Sort(apps)
	s.Summary = fmt.Sprintf("service=%s ready=%s endpoints=%d apps=[%s]", rs.Status.ServiceStatus, reason, rs.Status.NumServeEndpoints, strings.Join(apps, " "))
	return s
}

// kubeflowState reads a Kubeflow training job (PyTorchJob, TFJob,
// XGBoostJob, PaddleJob, JAXJob): finished by its Succeeded or Failed
// condition, started by its start time. Kueue's MultiKueue adapter for these
// kinds copies the worker's whole status to the manager, so the summary is
// every role's pod counts and the terminal condition.
func kubeflowState(obj client.Object) JobState {
	spec, status := kubeflowParts(obj)
	s := JobState{Suspended: ptr.Deref(spec.Suspend, false), Started: status.StartTime != nil}
	for _, c := range status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case kftraining.JobSucceeded:
			s.Succeeded, s.Reason = true, c.Reason
		case kftraining.JobFailed:
			s.Failed, s.Reason = true, c.Reason
		}
	}
	roles := make([]string, 0, len(status.ReplicaStatuses))
	for role, rs := range status.ReplicaStatuses {
		if rs != nil {
			roles = append(roles, roleSummary(string(role), rs.Active, rs.Succeeded, rs.Failed))
		}
	}
	s.Summary = replicaSummary(roles, s)
	return s
}

// mpiJobState reads an MPIJob (the MPI operator's kubeflow.org/v2beta1) as
// kubeflowState reads the training-operator's jobs: its status has the same
// shape in a type of its own, and Kueue's MultiKueue adapter copies all of
// it.
func mpiJobState(obj client.Object) JobState {
	j := obj.(*kfmpi.MPIJob)
	s := JobState{Suspended: ptr.Deref(j.Spec.RunPolicy.Suspend, false), Started: j.Status.StartTime != nil}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case kfmpi.JobSucceeded:
			s.Succeeded, s.Reason = true, c.Reason
		case kfmpi.JobFailed:
			s.Failed, s.Reason = true, c.Reason
		}
	}
	roles := make([]string, 0, len(j.Status.ReplicaStatuses))
	for role, rs := range j.Status.ReplicaStatuses {
		if rs != nil {
			roles = append(roles, roleSummary(string(role), rs.Active, rs.Succeeded, rs.Failed))
		}
	}
	s.Summary = replicaSummary(roles, s)
	return s
}

func roleSummary(role string, active, succeeded, failed int32) string {
	return fmt.Sprintf("%s(active=%d succeeded=%d failed=%d)", role, active, succeeded, failed)
}

// replicaSummary is the roles' counts in a fixed order and the terminal
// condition.
func replicaSummary(roles []string, s JobState) string {
	slices.Sort(roles)
	terminal := "none"
	if s.Finished() {
		terminal = map[bool]string{true: "Succeeded", false: "Failed"}[s.Succeeded]
	}
	return fmt.Sprintf("%s terminal=%s", strings.Join(roles, " "), terminal)
}

// kubeflowParts returns a Kubeflow training job's run policy and status.
func kubeflowParts(obj client.Object) (kftraining.RunPolicy, kftraining.JobStatus) {
	switch j := obj.(type) {
	case *kftraining.PyTorchJob:
		return j.Spec.RunPolicy, j.Status
	case *kftraining.TFJob:
		return j.Spec.RunPolicy, j.Status
	case *kftraining.XGBoostJob:
		return j.Spec.RunPolicy, j.Status
	case *kftraining.PaddleJob:
		return j.Spec.RunPolicy, j.Status
	case *kftraining.JAXJob:
		return j.Spec.RunPolicy, j.Status
	}
	return kftraining.RunPolicy{}, kftraining.JobStatus{}
}

// trainJobState reads a TrainJob: finished by its Complete or Failed
// condition, started once it is not suspended and its JobSet reports jobs;
// Kueue's MultiKueue adapter copies the worker's whole status, so the
// summary is every job's counts and the terminal condition.
func trainJobState(obj client.Object) JobState {
	t := obj.(*trainer.TrainJob)
	s := JobState{Suspended: ptr.Deref(t.Spec.Suspend, false)}
	s.Started = !s.Suspended && len(t.Status.JobsStatus) > 0
	if c := apimeta.FindStatusCondition(t.Status.Conditions, trainer.TrainJobComplete); c != nil && c.Status == metav1.ConditionTrue {
		s.Succeeded, s.Reason = true, c.Reason
	}
	if c := apimeta.FindStatusCondition(t.Status.Conditions, trainer.TrainJobFailed); c != nil && c.Status == metav1.ConditionTrue {
		s.Failed, s.Reason = true, c.Reason
	}
	jobs := make([]string, 0, len(t.Status.JobsStatus))
	for _, j := range t.Status.JobsStatus {
		jobs = append(jobs, roleSummary(j.Name, ptr.Deref(j.Active, 0), ptr.Deref(j.Succeeded, 0), ptr.Deref(j.Failed, 0)))
	}
	s.Summary = replicaSummary(jobs, s)
	return s
}

// appWrapperState reads an AppWrapper by its phase, as Kueue does (finished
// when Succeeded or Failed); Kueue's MultiKueue adapter copies the worker's
// whole status, so the summary is the phase, the retry count and the
// conditions' states.
func appWrapperState(obj client.Object) JobState {
	a := obj.(*awv1beta2.AppWrapper)
	s := JobState{Suspended: a.Spec.Suspend}
	switch a.Status.Phase {
	case awv1beta2.AppWrapperRunning, awv1beta2.AppWrapperSucceeded, awv1beta2.AppWrapperFailed, awv1beta2.AppWrapperResetting:
		s.Started = true
	}
	switch a.Status.Phase {
	case awv1beta2.AppWrapperSucceeded:
		s.Succeeded, s.Reason = true, string(a.Status.Phase)
	case awv1beta2.AppWrapperFailed:
		s.Failed, s.Reason = true, string(a.Status.Phase)
	}
	conds := make([]string, 0, len(a.Status.Conditions))
	for _, c := range a.Status.Conditions {
		conds = append(conds, c.Type+"="+string(c.Status))
	}
	slices.Sort(conds)
	s.Summary = fmt.Sprintf("phase=%s retries=%d %s", a.Status.Phase, a.Status.Retries, strings.Join(conds, " "))
	return s
}

// statefulSetState reads a StatefulSet: it has no suspend (Kueue gates its
// pods instead), has started once every replica it asks for is ready, and
// never finishes; the
// summary is its replica counts (which the manager's do not follow: see
// StatusNotCopied).
func statefulSetState(obj client.Object) JobState {
	st := obj.(*appsv1.StatefulSet)
	want := ptr.Deref(st.Spec.Replicas, 1)
	return JobState{Started: want > 0 && st.Status.ReadyReplicas >= want,
		Summary: fmt.Sprintf("replicas=%d ready=%d", st.Status.Replicas, st.Status.ReadyReplicas)}
}

// leaderWorkerSetState reads a LeaderWorkerSet: it has started once every
// group it asks for is ready, and never finishes; the summary is its counts (which the manager's
// do not follow: see StatusNotCopied).
func leaderWorkerSetState(obj client.Object) JobState {
	l := obj.(*lwsv1.LeaderWorkerSet)
	want := ptr.Deref(l.Spec.Replicas, 1)
	return JobState{Started: want > 0 && l.Status.ReadyReplicas >= want,
		Summary: fmt.Sprintf("replicas=%d ready=%d", l.Status.Replicas, l.Status.ReadyReplicas)}
}
