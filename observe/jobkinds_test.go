package observe

import (
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
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
