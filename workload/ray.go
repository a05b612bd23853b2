package workload

import (
	"fmt"
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/multikueue-testkit/testkit/topology"
)

// Ray defaults of the built RayJobs and RayClusters: the Ray version Kueue
// v0.17.0's own tests default to (pkg/util/testing.TestRayVersion) and its
// image. A real cluster pulls it for the head, worker and submitter pods;
// the local topology runs no image.
const (
	DefaultRayVersion = "2.41.0"
	DefaultRayImage   = "rayproject/ray:" + DefaultRayVersion
)

// Container names of a built Ray cluster's pods.
const (
	rayHeadContainer      = "ray-head"
	rayWorkerContainer    = "ray-worker"
	raySubmitterContainer = "ray-job-submitter"
	// rayWorkerGroup is the one worker group's name ("head" is Kueue's
	// reserved pod set name).
	rayWorkerGroup = "workers"
)

// rayCluster is what a built RayJob's and RayCluster's Ray cluster is made of.
type rayCluster struct {
	spec  rayv1.RayClusterSpec
	image string
}

func newRayCluster() rayCluster {
	pod := func(container string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: container}}}}
	}
	return rayCluster{
		image: DefaultRayImage,
		spec: rayv1.RayClusterSpec{
			RayVersion: DefaultRayVersion,
			HeadGroupSpec: rayv1.HeadGroupSpec{
				RayStartParams: map[string]string{},
				Template:       pod(rayHeadContainer),
			},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName:      rayWorkerGroup,
				Replicas:       ptr.To[int32](1),
				MinReplicas:    ptr.To[int32](1),
				MaxReplicas:    ptr.To[int32](1),
				RayStartParams: map[string]string{},
				Template:       pod(rayWorkerContainer),
			}},
		},
	}
}

// containers are the head's and the worker group's containers.
func (r *rayCluster) containers() []*corev1.Container {
	return []*corev1.Container{
		&r.spec.HeadGroupSpec.Template.Spec.Containers[0],
		&r.spec.WorkerGroupSpecs[0].Template.Spec.Containers[0],
	}
}

// requests sets the head's and the workers' requests, or records in bad why not.
func (r *rayCluster) requests(bad *badInput, cpu, memory string) {
	var req corev1.ResourceList
	if !bad.setRequests(&req, cpu, memory) {
		return
	}
	for _, c := range r.containers() {
		c.Resources.Requests = req.DeepCopy()
	}
}

// workers sets the worker group's size, or records in bad why not.
func (r *rayCluster) workers(bad *badInput, n int32) {
	if n < 0 {
		bad.fail("WorkerReplicas", "%d: the number of Ray workers must not be negative", n)
		return
	}
	g := &r.spec.WorkerGroupSpecs[0]
	g.Replicas, g.MinReplicas, g.MaxReplicas = ptr.To(n), ptr.To(n), ptr.To(n)
}

// built returns a copy of the spec with the image set.
func (r rayCluster) built() *rayv1.RayClusterSpec {
	spec := r.spec.DeepCopy()
	cp := rayCluster{spec: *spec}
	for _, c := range cp.containers() {
		c.Image = r.image
	}
	return &cp.spec
}

// RayJobBuilder builds a RayJob (ray.io/v1), created suspended as Kueue
// expects, with shutdownAfterJobFinishes (Kueue requires it), submission in
// a submitter Job (K8sJobMode) and a Ray cluster of one head and one worker.
// It needs the topology's RayJob integration (topology.IntegrationRayJob).
//
// It runs the same on the local topology and on a real cluster: the
// entrypoint is `python -c` sleeping the run duration and exiting 0, or 1
// with Fails, so the Ray job SUCCEEDS or FAILS; the submitter pod (which
// waits for the Ray job) carries the run-duration annotation and always
// succeeds. On the local topology the KubeRay operator runs for real; KWOK
// runs the Ray pods on the worker's Nodes and the Ray dashboard follows the
// annotations (the submitter runs for the run duration; the Ray job ends
// with it, FAILED with Fails).
type RayJobBuilder struct {
	badInput
	rj      rayv1.RayJob
	cluster rayCluster
	run     run
}

// NewRayJob starts a RayJob that runs for DefaultRunDuration and succeeds.
func NewRayJob(name, namespace string) *RayJobBuilder {
	return &RayJobBuilder{
		badInput: badInput{kind: "RayJob", name: name},
		rj: rayv1.RayJob{
			TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayJob"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}, Annotations: map[string]string{}},
			Spec: rayv1.RayJobSpec{
				Suspend:                  true,
				ShutdownAfterJobFinishes: true,
				SubmissionMode:           rayv1.K8sJobMode,
				SubmitterPodTemplate: &corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: raySubmitterContainer}},
					},
				},
			},
		},
		cluster: newRayCluster(),
		run:     newRun(),
	}
}

// Queue sets the LocalQueue.
func (b *RayJobBuilder) Queue(q string) *RayJobBuilder { b.rj.Labels[QueueLabel] = q; return b }

// Requests sets the CPU and memory requests of the head's and each worker's
// container (quantities; "" skips one). A quantity that does not parse is
// reported by Err.
func (b *RayJobBuilder) Requests(cpu, memory string) *RayJobBuilder {
	b.cluster.requests(&b.badInput, cpu, memory)
	return b
}

// WorkerReplicas sets the number of Ray worker pods (default 1); a negative
// number is reported by Err.
func (b *RayJobBuilder) WorkerReplicas(n int32) *RayJobBuilder {
	b.cluster.workers(&b.badInput, n)
	return b
}

// WorkloadPriorityClass sets Kueue's workload priority class label.
func (b *RayJobBuilder) WorkloadPriorityClass(name string) *RayJobBuilder {
	b.rj.Labels[PriorityClassLabel] = name
	return b
}

// RunFor sets how long the Ray job runs: the entrypoint's sleep and the
// run-duration annotation (on the RayJob and the submitter pod). A negative
// duration is reported by Err.
func (b *RayJobBuilder) RunFor(d time.Duration) *RayJobBuilder {
	if !b.runFor(&b.run, d) {
		return b
	}
	b.rj.Annotations[topology.AnnotationRunDuration] = d.String()
	b.rj.Spec.SubmitterPodTemplate.Annotations[topology.AnnotationRunDuration] = d.String()
	return b
}

// Fails makes the Ray job fail (the entrypoint exits 1; the outcome
// annotation on the RayJob), so the RayJob ends Failed.
func (b *RayJobBuilder) Fails() *RayJobBuilder {
	b.run.fails = true
	b.rj.Annotations[topology.AnnotationOutcome] = topology.OutcomeFailed
	return b
}

// Image sets the Ray image of the head, worker and submitter pods (default
// DefaultRayImage); it must have python and the ray CLI.
func (b *RayJobBuilder) Image(image string) *RayJobBuilder { b.cluster.image = image; return b }

// Label sets a label on the RayJob.
func (b *RayJobBuilder) Label(k, v string) *RayJobBuilder { b.rj.Labels[k] = v; return b }

// Annotation sets an annotation on the RayJob.
func (b *RayJobBuilder) Annotation(k, v string) *RayJobBuilder { b.rj.Annotations[k] = v; return b }

// Err returns the bad input the builder was given, each error naming the
// RayJob and the field, or nil; Obj builds the RayJob without it.
func (b *RayJobBuilder) Err() error { return b.err() }

// Obj returns a copy of the RayJob built so far.
func (b *RayJobBuilder) Obj() *rayv1.RayJob {
	rj := b.rj.DeepCopy()
	rj.Spec.RayClusterSpec = b.cluster.built()
	rj.Spec.Entrypoint = b.run.pythonEntrypoint()
	rj.Spec.SubmitterPodTemplate.Spec.Containers[0].Image = b.cluster.image
	return rj
}

// pythonEntrypoint is the Ray job's entrypoint: sleep for the run duration,
// then exit 0, or 1 when the job fails.
func (r run) pythonEntrypoint() string {
	code := 0
	if r.fails {
		code = 1
	}
	secs := strconv.FormatFloat(r.duration.Seconds(), 'f', -1, 64)
	return fmt.Sprintf(`python -c "import sys, time; time.sleep(%s); sys.exit(%d)"`, secs, code)
}

// RayClusterBuilder builds a RayCluster (ray.io/v1) of one head and one
// worker, created suspended as Kueue expects. It needs the topology's
// RayCluster integration (topology.IntegrationRayCluster). A RayCluster has
// no run duration or outcome: it runs (ready) until it is deleted; on the
// local topology the KubeRay operator runs for real and KWOK makes its pods
// Running and Ready on the worker's Nodes.
type RayClusterBuilder struct {
	badInput
	rc      rayv1.RayCluster
	cluster rayCluster
}

// NewRayCluster starts a RayCluster.
func NewRayCluster(name, namespace string) *RayClusterBuilder {
	return &RayClusterBuilder{
		badInput: badInput{kind: "RayCluster", name: name},
		rc: rayv1.RayCluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}, Annotations: map[string]string{}},
		},
		cluster: newRayCluster(),
	}
}

// Queue sets the LocalQueue.
func (b *RayClusterBuilder) Queue(q string) *RayClusterBuilder { b.rc.Labels[QueueLabel] = q; return b }

// Requests sets the CPU and memory requests of the head's and each worker's
// container (quantities; "" skips one). A quantity that does not parse is
// reported by Err.
func (b *RayClusterBuilder) Requests(cpu, memory string) *RayClusterBuilder {
	b.cluster.requests(&b.badInput, cpu, memory)
	return b
}

// WorkerReplicas sets the number of Ray worker pods (default 1); a negative
// number is reported by Err.
func (b *RayClusterBuilder) WorkerReplicas(n int32) *RayClusterBuilder {
	b.cluster.workers(&b.badInput, n)
	return b
}

// WorkloadPriorityClass sets Kueue's workload priority class label.
func (b *RayClusterBuilder) WorkloadPriorityClass(name string) *RayClusterBuilder {
	b.rc.Labels[PriorityClassLabel] = name
	return b
}

// Image sets the Ray image of the head and worker pods (default
// DefaultRayImage).
func (b *RayClusterBuilder) Image(image string) *RayClusterBuilder { b.cluster.image = image; return b }

// Label sets a label on the RayCluster.
func (b *RayClusterBuilder) Label(k, v string) *RayClusterBuilder { b.rc.Labels[k] = v; return b }

// Annotation sets an annotation on the RayCluster.
func (b *RayClusterBuilder) Annotation(k, v string) *RayClusterBuilder {
	b.rc.Annotations[k] = v
	return b
}

// Err returns the bad input the builder was given, each error naming the
// RayCluster and the field, or nil; Obj builds the RayCluster without it.
func (b *RayClusterBuilder) Err() error { return b.err() }

// Obj returns a copy of the RayCluster built so far, suspended.
func (b *RayClusterBuilder) Obj() *rayv1.RayCluster {
	rc := b.rc.DeepCopy()
	rc.Spec = *b.cluster.built()
	rc.Spec.Suspend = ptr.To(true)
	return rc
}

// RayServiceBuilder builds a RayService (ray.io/v1) whose Ray cluster, one
// head and one worker, is created suspended (spec.rayClusterConfig.suspend)
// as Kueue expects; Kueue's webhook sets managedBy on the manager. It needs
// the topology's RayService integration (topology.IntegrationRayService).
// Like a RayCluster it has no run duration or outcome: it serves until it
// is deleted. Its serve config (spec.serveConfigV2) is DefaultServeConfig,
// one Serve application of one deployment, unless ServeConfig sets another:
// KubeRay calls a RayService ready only once Ray Serve reports every
// application RUNNING (and one at least), so an empty config never is.
type RayServiceBuilder struct {
	badInput
	rs      rayv1.RayService
	cluster rayCluster
}

// NewRayService starts a RayService.
func NewRayService(name, namespace string) *RayServiceBuilder {
	return &RayServiceBuilder{
		badInput: badInput{kind: "RayService", name: name},
		rs: rayv1.RayService{
			TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayService"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}, Annotations: map[string]string{}},
			Spec:       rayv1.RayServiceSpec{ServeConfigV2: DefaultServeConfig},
		},
		cluster: newRayCluster(),
	}
}

// Queue sets the LocalQueue.
func (b *RayServiceBuilder) Queue(q string) *RayServiceBuilder { b.rs.Labels[QueueLabel] = q; return b }

// Requests sets the CPU and memory requests of the head's and each worker's
// container (quantities; "" skips one). A quantity that does not parse is
// reported by Err.
func (b *RayServiceBuilder) Requests(cpu, memory string) *RayServiceBuilder {
	b.cluster.requests(&b.badInput, cpu, memory)
	return b
}

// WorkerReplicas sets the number of Ray worker pods (default 1); a negative
// number is reported by Err.
func (b *RayServiceBuilder) WorkerReplicas(n int32) *RayServiceBuilder {
	b.cluster.workers(&b.badInput, n)
	return b
}

// Image sets the Ray image of the head and worker pods (default
// DefaultRayImage).
func (b *RayServiceBuilder) Image(image string) *RayServiceBuilder { b.cluster.image = image; return b }

// DefaultServeConfig is NewRayService's serve config: Ray Serve's
// multi-application config of one application, "echo", of one deployment.
const DefaultServeConfig = `applications:
  - name: echo
    import_path: echo:app
    route_prefix: /
    deployments:
      - name: Echo
        num_replicas: 1
`

// ServeConfig sets the RayService's Ray Serve config (spec.serveConfigV2,
// YAML); "" is reported by Err.
func (b *RayServiceBuilder) ServeConfig(yaml string) *RayServiceBuilder {
	if yaml == "" {
		b.fail("ServeConfig", "empty: KubeRay calls a RayService ready only once Ray Serve runs an application")
	} else {
		b.rs.Spec.ServeConfigV2 = yaml
	}
	return b
}

// Label sets a label on the RayService.
func (b *RayServiceBuilder) Label(k, v string) *RayServiceBuilder { b.rs.Labels[k] = v; return b }

// Err returns the bad input the builder was given, each error naming the
// RayService and the field, or nil; Obj builds the RayService without it.
func (b *RayServiceBuilder) Err() error { return b.err() }

// Obj returns a copy of the RayService built so far, its cluster suspended.
func (b *RayServiceBuilder) Obj() *rayv1.RayService {
	rs := b.rs.DeepCopy()
	rs.Spec.RayClusterSpec = *b.cluster.built()
	rs.Spec.RayClusterSpec.Suspend = ptr.To(true)
	return rs
}
