package local

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/dashboardclient"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/multikueue-testkit/testkit/topology"
)

// The KubeRay operator (github.com/ray-project/kuberay/ray-operator v1.6.2, the library's pin)
// runs in this process on every worker of a topology with a Ray integration:
// its RayCluster reconciler and, with the RayJob CRD, its RayJob reconciler,
// as its main.go wires them, without metrics, batch schedulers, webhooks or
// the RayService and RayCronJob controllers. The manager's RayJobs and
// RayClusters are MultiKueue's (spec.managedBy), which KubeRay leaves alone.
//
// What no kubelet runs here is played: the pod runner makes the head and
// worker pods Running and Ready (so the RayCluster becomes ready), the
// submitter Job runs like any Job (executor, or real pods), and the Ray
// dashboard is rayDashboard below, driven by the run-duration and outcome
// annotations. KubeRay's reconcilers log through controller-runtime's
// process-global logger (Options.Logger), not the cluster's own log file.

// kuberayConcurrency is KubeRay's default reconcile concurrency.
const kuberayConcurrency = 1

// startKubeRay runs the KubeRay reconcilers on worker lc, in a manager with
// the kuberay-operator identity. rayJobs says whether the RayJob CRD is
// installed.
func (lc *localCluster) startKubeRay(ctx context.Context, rayJobs bool, timeout time.Duration) error {
	scheme, err := topology.NewScheme()
	if err != nil {
		return err
	}
	mgr, err := newComponentManager(componentOptions{
		cfg: lc.cp.configAs(lc.cp.kuberay), logPath: filepath.Join(lc.cp.dir, "kuberay.log"), scheme: scheme,
	})
	if err != nil {
		return fmt.Errorf("cluster %q: KubeRay operator: %w", lc.name, err)
	}
	if err := ray.NewReconciler(ctx, mgr, ray.RayClusterReconcilerOptions{}).SetupWithManager(mgr, kuberayConcurrency); err != nil {
		return fmt.Errorf("cluster %q: KubeRay RayCluster controller: %w", lc.name, err)
	}
	if rayJobs {
		r := ray.NewRayJobReconciler(ctx, mgr, ray.RayJobReconcilerOptions{}, rayClients{})
		if err := r.SetupWithManager(mgr, kuberayConcurrency); err != nil {
			return fmt.Errorf("cluster %q: KubeRay RayJob controller: %w", lc.name, err)
		}
	}
	return lc.startComponent(ctx, "KubeRay operator", mgr, nil, timeout)
}

// rayClients implements KubeRay's utils.ClientProvider: the dashboard is
// rayDashboard; the HTTP proxy client (RayService only) a healthy fake.
type rayClients struct{}

var _ utils.ClientProvider = rayClients{}

// GetDashboardClient implements utils.ClientProvider.
func (rayClients) GetDashboardClient(_ context.Context, mgr manager.Manager) func(*rayv1.RayCluster, string) (dashboardclient.RayDashboardClientInterface, error) {
	cl := mgr.GetClient()
	return func(rc *rayv1.RayCluster, _ string) (dashboardclient.RayDashboardClientInterface, error) {
		return &rayDashboard{client: cl, cluster: rc.DeepCopy()}, nil
	}
}

// GetHttpProxyClient implements utils.ClientProvider.
func (rayClients) GetHttpProxyClient(manager.Manager) func(string, string, string, int) utils.RayHttpProxyClientInterface {
	return func(string, string, string, int) utils.RayHttpProxyClientInterface {
		return &utils.FakeRayHttpProxyClient{IsHealthy: true}
	}
}

// rayDashboard stands for the Ray dashboard of one RayCluster: it knows one
// Ray job, the one of the RayJob that owns the cluster. The job runs while
// the RayJob's submitter Job runs (`ray job submit` waits for the job) and
// ends when it finishes, SUCCEEDED, or FAILED when the RayJob has the
// outcome annotation Failed. A RayJob without a submitter Job (HTTPMode)
// runs for its run-duration annotation from its status.startTime. Other
// dashboard calls (submissions, stops, Serve) are KubeRay's own fake's.
type rayDashboard struct {
	utils.FakeRayDashboardClient
	client  client.Client
	cluster *rayv1.RayCluster
}

// GetJobInfo implements dashboardclient.RayDashboardClientInterface.
func (d *rayDashboard) GetJobInfo(ctx context.Context, jobID string) (*utiltypes.RayJobInfo, error) {
	info := &utiltypes.RayJobInfo{JobId: jobID, SubmissionId: jobID, JobStatus: rayv1.JobStatusPending}
	owner := metav1.GetControllerOf(d.cluster)
	if owner == nil || owner.Kind != "RayJob" {
		info.JobStatus = rayv1.JobStatusRunning
		return info, nil
	}
	rj := &rayv1.RayJob{}
	if err := d.client.Get(ctx, client.ObjectKey{Namespace: d.cluster.Namespace, Name: owner.Name}, rj); err != nil {
		return nil, err
	}
	info.Entrypoint = rj.Spec.Entrypoint
	dur, outcome, err := runSpec(rj.Annotations)
	if err != nil {
		return nil, fmt.Errorf("RayJob %s/%s: %w", rj.Namespace, rj.Name, err)
	}
	var start, end *metav1.Time
	submitter := &batchv1.Job{}
	switch err := d.client.Get(ctx, client.ObjectKey{Namespace: rj.Namespace, Name: rj.Name}, submitter); {
	case err == nil:
		start = submitter.Status.StartTime
		if c := jobFinishedAt(submitter); c != nil {
			end = c
		}
	case client.IgnoreNotFound(err) != nil:
		return nil, err
	default:
		start = rj.Status.StartTime
		if start != nil && !time.Now().Before(start.Add(dur)) {
			end = &metav1.Time{Time: start.Add(dur)}
		}
	}
	if start == nil {
		return info, nil
	}
	info.JobStatus = rayv1.JobStatusRunning
	info.StartTime = uint64(start.UnixMilli())
	if end == nil {
		return info, nil
	}
	info.EndTime = uint64(end.UnixMilli())
	if outcome == topology.OutcomeFailed {
		info.JobStatus, info.Message = rayv1.JobStatusFailed, "Job entrypoint command failed with exit code 1"
	} else {
		info.JobStatus, info.Message = rayv1.JobStatusSucceeded, "Job finished successfully."
	}
	return info, nil
}

// ListJobs implements dashboardclient.RayDashboardClientInterface.
func (d *rayDashboard) ListJobs(ctx context.Context) (*[]utiltypes.RayJobInfo, error) {
	info, err := d.GetJobInfo(ctx, "")
	if err != nil {
		return nil, err
	}
	return &[]utiltypes.RayJobInfo{*info}, nil
}

// jobFinishedAt is when a Job got its Complete or Failed condition, nil if
// it has not.
func jobFinishedAt(job *batchv1.Job) *metav1.Time {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			t := c.LastTransitionTime
			return &t
		}
	}
	return nil
}
