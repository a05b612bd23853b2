package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/topology"
)

// Ports and paths of Ray that KubeRay calls: the head Service's dashboard
// (KubeRay's DefaultDashboardPort), its Serve applications API
// (dashboardclient.ServeDetailsPath) and the Serve proxy's health check on
// a pod (DefaultServingPort, RayServeProxyHealthPath).
const (
	rayDashboardPort         = "8265"
	rayServeApplicationsPath = "/api/serve/applications/"
	rayServeProxyPort        = "8000"
	rayServeProxyHealthPath  = "/-/healthz"
)

// rayHead stands for the Ray dashboards of one worker's RayCluster head
// pods: an HTTP proxy, on loopback, that the KubeRay operator's plain-HTTP
// requests go through (HTTP_PROXY). A request for
// http://<svc>.<ns>.svc.<domain>:8265/api/jobs/... is answered for the
// RayCluster whose head Service is <ns>/<svc>; anything else is refused
// (502), as no other plain-HTTP destination exists here.
//
// It knows one Ray job per cluster, the one of the RayJob that owns it. The
// job runs while the RayJob's submitter Job runs (`ray job submit` waits for
// the job) and ends when it finishes, SUCCEEDED, or FAILED when the RayJob has
// the outcome annotation Failed. A RayJob without a submitter Job (HTTPMode)
// runs for its run-duration annotation from its status.startTime. Job
// submissions, stops and deletions are acknowledged; logs are empty.
//
// For a RayService's cluster it plays Ray Serve too: every application of
// the RayService's serve config runs (RUNNING, its deployments HEALTHY), a
// config PUT is acknowledged, and a Serve proxy's health check on a pod
// (http://<pod IP>:8000/-/healthz, also proxied) passes while the pod is
// Ready. No Serve traffic is answered.
type rayHead struct {
	cluster string
	client  client.Client
	ln      net.Listener
	srv     *http.Server
}

func startRayHead(cluster string, cfg *rest.Config) (*rayHead, error) {
	scheme, err := topology.NewScheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &rayHead{cluster: cluster, client: cl, ln: ln}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *rayHead) url() string { return "http://" + h.ln.Addr().String() }

// close stops serving. Nil-safe.
func (h *rayHead) close() error {
	if h == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return h.srv.Shutdown(ctx)
}

// ServeHTTP answers a proxied dashboard request, or a Ray Serve proxy's
// health check.
func (h *rayHead) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, port, err := net.SplitHostPort(r.Host)
	if err == nil && port == rayServeProxyPort {
		h.proxyHealth(w, r, host)
		return
	}
	if err != nil || port != rayDashboardPort {
		http.Error(w, fmt.Sprintf("cluster %q: no route to %s (only Ray head dashboards, port %s, and Serve proxies' health, port %s, are reachable)",
			h.cluster, r.Host, rayDashboardPort, rayServeProxyPort), http.StatusBadGateway)
		return
	}
	parts := strings.Split(host, ".")
	if len(parts) < 3 || parts[2] != "svc" {
		http.Error(w, fmt.Sprintf("cluster %q: %s is not a Service address", h.cluster, host), http.StatusBadGateway)
		return
	}
	rc, err := h.rayCluster(r.Context(), parts[1], parts[0])
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if r.URL.Path == rayServeApplicationsPath {
		switch r.Method {
		case http.MethodGet:
			details, err := h.serveDetails(r.Context(), rc)
			reply(w, details, err)
		case http.MethodPut:
			reply(w, map[string]string{}, nil)
		default:
			http.NotFound(w, r)
		}
		return
	}
	id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/api/jobs/"), "/")
	switch {
	case !strings.HasPrefix(r.URL.Path, "/api/jobs/"):
		http.NotFound(w, r)
	case r.Method == http.MethodGet && id == "":
		info, err := h.jobInfo(r.Context(), rc, "")
		reply(w, []any{info}, err)
	case r.Method == http.MethodGet && rest == "":
		info, err := h.jobInfo(r.Context(), rc, id)
		reply(w, info, err)
	case r.Method == http.MethodGet && rest == "logs":
		reply(w, map[string]string{}, nil)
	case r.Method == http.MethodPost && id == "":
		var req struct {
			SubmissionID string `json:"submission_id"`
		}
		err := json.NewDecoder(r.Body).Decode(&req)
		reply(w, map[string]string{"job_id": req.SubmissionID, "submission_id": req.SubmissionID}, err)
	case r.Method == http.MethodPost && rest == "stop":
		reply(w, map[string]bool{"stopped": true}, nil)
	case r.Method == http.MethodDelete && rest == "":
		reply(w, map[string]bool{"deleted": true}, nil)
	default:
		http.NotFound(w, r)
	}
}

func reply(w http.ResponseWriter, body any, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// rayCluster is the RayCluster of namespace whose head Service is svc.
func (h *rayHead) rayCluster(ctx context.Context, namespace, svc string) (*rayv1.RayCluster, error) {
	var list rayv1.RayClusterList
	if err := h.client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("cluster %q: list RayClusters in %s: %w", h.cluster, namespace, err)
	}
	for i := range list.Items {
		rc := &list.Items[i]
		name := rc.Name + "-head-svc" // KubeRay's GenerateHeadServiceName
		if hs := rc.Spec.HeadGroupSpec.HeadService; hs != nil && hs.Name != "" {
			name = hs.Name
		}
		if rc.Status.Head.ServiceName == svc || name == svc {
			return rc, nil
		}
	}
	return nil, fmt.Errorf("cluster %q: no RayCluster in %s has the head Service %s", h.cluster, namespace, svc)
}

// jobInfo is the dashboard's answer for job jobID of RayCluster rc.
func (h *rayHead) jobInfo(ctx context.Context, rc *rayv1.RayCluster, jobID string) (*utiltypes.RayJobInfo, error) {
	info := &utiltypes.RayJobInfo{JobId: jobID, SubmissionId: jobID, JobStatus: rayv1.JobStatusPending}
	owner := metav1.GetControllerOf(rc)
	if owner == nil || owner.Kind != "RayJob" {
		info.JobStatus = rayv1.JobStatusRunning
		return info, nil
	}
	rj := &rayv1.RayJob{}
	if err := h.client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: owner.Name}, rj); err != nil {
		return nil, err
	}
	info.Entrypoint = rj.Spec.Entrypoint
	dur, outcome, err := runSpec(rj.Annotations)
	if err != nil {
		return nil, fmt.Errorf("RayJob %s/%s: %w", rj.Namespace, rj.Name, err)
	}
	var start, end *metav1.Time
	submitter := &batchv1.Job{}
	switch err := h.client.Get(ctx, client.ObjectKey{Namespace: rj.Namespace, Name: rj.Name}, submitter); {
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

// serveDetails is Ray Serve's answer for RayCluster rc: for a RayService's
// cluster, every application of the RayService's serve config (read at the
// request, so a config MultiKueue forwards from the manager is what Serve
// runs) RUNNING with each of its deployments HEALTHY; for any other cluster,
// no application.
func (h *rayHead) serveDetails(ctx context.Context, rc *rayv1.RayCluster) (*utiltypes.ServeDetails, error) {
	details := &utiltypes.ServeDetails{Applications: map[string]utiltypes.ServeApplicationDetails{}, DeployMode: "MULTI_APP"}
	owner := metav1.GetControllerOf(rc)
	if owner == nil || owner.Kind != "RayService" {
		return details, nil
	}
	rs := &rayv1.RayService{}
	if err := h.client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: owner.Name}, rs); err != nil {
		return nil, fmt.Errorf("cluster %q: RayCluster %s/%s's RayService: %w", h.cluster, rc.Namespace, rc.Name, err)
	}
	var cfg struct {
		Applications []struct {
			Name        string `json:"name"`
			RoutePrefix string `json:"route_prefix"`
			Deployments []struct {
				Name string `json:"name"`
			} `json:"deployments"`
		} `json:"applications"`
	}
	if err := yaml.Unmarshal([]byte(rs.Spec.ServeConfigV2), &cfg); err != nil {
		return nil, fmt.Errorf("cluster %q: RayService %s/%s: spec.serveConfigV2: %w", h.cluster, rs.Namespace, rs.Name, err)
	}
	for _, app := range cfg.Applications {
		a := utiltypes.ServeApplicationDetails{
			ServeApplicationStatus: utiltypes.ServeApplicationStatus{Name: app.Name, Status: rayv1.ApplicationStatusEnum.RUNNING},
			RoutePrefix:            app.RoutePrefix,
			Deployments:            map[string]utiltypes.ServeDeploymentDetails{},
		}
		for _, d := range app.Deployments {
			a.Deployments[d.Name] = utiltypes.ServeDeploymentDetails{ServeDeploymentStatus: utiltypes.ServeDeploymentStatus{Name: d.Name, Status: rayv1.DeploymentStatusEnum.HEALTHY}}
		}
		details.Applications[app.Name] = a
	}
	return details, nil
}

// proxyHealth answers a Ray Serve proxy's health check on pod address ip:
// healthy when a Ray pod of that address is Ready.
func (h *rayHead) proxyHealth(w http.ResponseWriter, r *http.Request, ip string) {
	if r.URL.Path != rayServeProxyHealthPath {
		http.NotFound(w, r)
		return
	}
	var pods corev1.PodList
	if err := h.client.List(r.Context(), &pods, client.HasLabels{"ray.io/cluster"}); err != nil {
		http.Error(w, fmt.Sprintf("cluster %q: list Ray pods: %v", h.cluster, err), http.StatusServiceUnavailable)
		return
	}
	for _, p := range pods.Items {
		if p.Status.PodIP != ip {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				_, _ = w.Write([]byte("success"))
				return
			}
		}
	}
	http.Error(w, fmt.Sprintf("cluster %q: no Ready Ray pod has the address %s", h.cluster, ip), http.StatusServiceUnavailable)
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
