package observe

import (
	"testing"

	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

func TestJobStateFollowsKueue(t *testing.T) {
	ray := func(d rayv1.JobDeploymentStatus, s rayv1.JobStatus) *rayv1.RayJob {
		return &rayv1.RayJob{Status: rayv1.RayJobStatus{JobDeploymentStatus: d, JobStatus: s}}
	}
	js := func(cond jobset.JobSetConditionType) *jobset.JobSet {
		return &jobset.JobSet{Status: jobset.JobSetStatus{Conditions: []metav1.Condition{{Type: string(cond), Status: metav1.ConditionTrue, Reason: "R"}}}}
	}
	kf := func(cond kftraining.JobConditionType) *kftraining.PyTorchJob {
		return &kftraining.PyTorchJob{Status: kftraining.JobStatus{Conditions: []kftraining.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: "R"}}}}
	}
	for _, tc := range []struct {
		name                string
		obj                 client.Object
		succeeded, finished bool
	}{
		{"RayJob retrying after a failed attempt", ray(rayv1.JobDeploymentStatusRetrying, rayv1.JobStatusFailed), false, false},
		{"RayJob complete and succeeded", ray(rayv1.JobDeploymentStatusComplete, rayv1.JobStatusSucceeded), true, true},
		{"RayJob complete but stopped", ray(rayv1.JobDeploymentStatusComplete, rayv1.JobStatusStopped), false, true},
		{"RayJob deployment failed", ray(rayv1.JobDeploymentStatusFailed, ""), false, true},
		{"JobSet completed", js(jobset.JobSetCompleted), true, true},
		{"JobSet failed", js(jobset.JobSetFailed), false, true},
		{"JobSet suspended", js(jobset.JobSetSuspended), false, false},
		{"PyTorchJob running", kf(kftraining.JobRunning), false, false},
		{"PyTorchJob succeeded", kf(kftraining.JobSucceeded), true, true},
		{"PyTorchJob failed", kf(kftraining.JobFailed), false, true},
		{"PyTorchJob suspended", kf(kftraining.JobSuspended), false, false},
	} {
		st, ok := JobStateOf(tc.obj)
		if !ok {
			t.Fatalf("%s: not a job kind", tc.name)
		}
		if st.Succeeded != tc.succeeded || st.Finished() != tc.finished {
			t.Errorf("%s: succeeded=%t finished=%t, want %t %t", tc.name, st.Succeeded, st.Finished(), tc.succeeded, tc.finished)
		}
	}
}

// TestKubeflowSummaryIsTheCopiedStatus checks that a Kubeflow job's summary
// holds every role's counts in a fixed order and the terminal condition,
// what MultiKueue copies from the worker.
func TestKubeflowSummaryIsTheCopiedStatus(t *testing.T) {
	j := &kftraining.TFJob{Status: kftraining.JobStatus{
		ReplicaStatuses: map[kftraining.ReplicaType]*kftraining.ReplicaStatus{
			"Worker": {Succeeded: 2}, "Chief": {Active: 1}, "PS": nil,
		},
		Conditions: []kftraining.JobCondition{{Type: kftraining.JobSucceeded, Status: corev1.ConditionTrue}},
	}}
	st, _ := JobStateOf(j)
	if want := "Chief(active=1 succeeded=0 failed=0) Worker(active=0 succeeded=2 failed=0) terminal=Succeeded"; st.Summary != want {
		t.Errorf("summary %q, want %q", st.Summary, want)
	}
}

// TestKubeflowPodsBelongToTheirJob checks that the training-operator's pods
// are tied to their job by its labels, and that a pod of another operator
// name is not taken for one.
func TestKubeflowPodsBelongToTheirJob(t *testing.T) {
	pod := func(op string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			kftraining.JobNameLabel: "train", kftraining.OperatorNameLabel: op}}}
	}
	for op, want := range map[string]Kind{"pytorchjob-controller": KindPyTorchJob, "tfjob-controller": KindTFJob,
		"xgboostjob-controller": KindXGBoostJob, "paddlejob-controller": KindPaddleJob, "jaxjob-controller": KindJAXJob,
		"mpi-operator": KindMPIJob} {
		if k, n, ok := podOwner(pod(op)); !ok || k != want || n != "train" {
			t.Errorf("%s: got %s %q %t, want %s train", op, k, n, ok, want)
		}
	}
	if k, _, ok := podOwner(pod("mpijob-controller")); ok {
		t.Errorf("a training-operator v1 MPIJob's pod (no kind the Observer records) was taken for a %s's", k)
	}
}

// TestManagedPodIsAJobOfItsOwn: a pod Kueue's pod integration manages and
// no recorded job object owns is its own job object; on the manager it
// stays suspended by the admission gate while the status MultiKueue copies
// shows it run and end; a Job's pod, managed or not, stays its Job's.
func TestManagedPodIsAJobOfItsOwn(t *testing.T) {
	managed := map[string]string{LabelManaged: "true", LabelPodGroup: "g"}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "g-0", Labels: managed}}
	if k, n, ok := podOwner(p); !ok || k != KindPod || n != "g-0" {
		t.Fatalf("a managed pod: got %s %q %t, want Pod g-0", k, n, ok)
	}
	jobPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-abc", Labels: map[string]string{"batch.kubernetes.io/job-name": "j", LabelManaged: "true"}}}
	if k, n, _ := podOwner(jobPod); k != KindJob || n != "j" {
		t.Errorf("a Job's pod: got %s %q, want Job j", k, n)
	}
	if _, _, ok := podOwner(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}); ok {
		t.Error("a pod Kueue does not manage was taken for a job object")
	}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: PodAdmissionGate}}
	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}}}
	st, ok := JobStateOf(p)
	if !ok || !st.Suspended || !st.Started || !st.Failed || st.Succeeded || st.Summary != "Failed (exit code 3)" {
		t.Errorf("a gated manager pod with a copied failed status: %+v", st)
	}
	p.Spec.SchedulingGates, p.Status = nil, corev1.PodStatus{}
	if st, _ := JobStateOf(p); st.Suspended || st.Started || st.Finished() || st.Summary != "Pending" {
		t.Errorf("an ungated pod not started: %+v", st)
	}
}
