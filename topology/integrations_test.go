package topology

import (
	"testing"

	"sigs.k8s.io/kueue/pkg/controller/jobs/appwrapper"
	"sigs.k8s.io/kueue/pkg/controller/jobs/deployment"
	"sigs.k8s.io/kueue/pkg/controller/jobs/job"
	"sigs.k8s.io/kueue/pkg/controller/jobs/jobset"
	"sigs.k8s.io/kueue/pkg/controller/jobs/kubeflow/jobs/jaxjob"
	"sigs.k8s.io/kueue/pkg/controller/jobs/kubeflow/jobs/paddlejob"
	"sigs.k8s.io/kueue/pkg/controller/jobs/kubeflow/jobs/pytorchjob"
	"sigs.k8s.io/kueue/pkg/controller/jobs/kubeflow/jobs/tfjob"
	"sigs.k8s.io/kueue/pkg/controller/jobs/kubeflow/jobs/xgboostjob"
	"sigs.k8s.io/kueue/pkg/controller/jobs/leaderworkerset"
	"sigs.k8s.io/kueue/pkg/controller/jobs/mpijob"
	"sigs.k8s.io/kueue/pkg/controller/jobs/pod"
	"sigs.k8s.io/kueue/pkg/controller/jobs/raycluster"
	"sigs.k8s.io/kueue/pkg/controller/jobs/rayjob"
	"sigs.k8s.io/kueue/pkg/controller/jobs/rayservice"
	"sigs.k8s.io/kueue/pkg/controller/jobs/statefulset"
	"sigs.k8s.io/kueue/pkg/controller/jobs/trainjob"
)

// TestIntegrationNamesAreKueues: the integration names spelled out in
// options.go are the framework names the Kueue module declares.
func TestIntegrationNamesAreKueues(t *testing.T) {
	for _, tc := range []struct{ ours, kueues string }{
		{IntegrationBatchJob, job.FrameworkName}, {IntegrationJobSet, jobset.FrameworkName},
		{IntegrationRayJob, rayjob.FrameworkName}, {IntegrationRayCluster, raycluster.FrameworkName},
		{IntegrationRayService, rayservice.FrameworkName}, {IntegrationMPIJob, mpijob.FrameworkName},
		{IntegrationPyTorchJob, pytorchjob.FrameworkName}, {IntegrationTFJob, tfjob.FrameworkName},
		{IntegrationXGBoostJob, xgboostjob.FrameworkName}, {IntegrationPaddleJob, paddlejob.FrameworkName},
		{IntegrationJAXJob, jaxjob.FrameworkName}, {IntegrationTrainJob, trainjob.FrameworkName},
		{IntegrationAppWrapper, appwrapper.FrameworkName}, {IntegrationPod, pod.FrameworkName},
		{IntegrationDeployment, deployment.FrameworkName}, {IntegrationStatefulSet, statefulset.FrameworkName},
		{IntegrationLeaderWorkerSet, leaderworkerset.FrameworkName},
	} {
		if tc.ours != tc.kueues {
			t.Errorf("integration %q; Kueue declares %q", tc.ours, tc.kueues)
		}
	}
}
