package workload_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

func TestRayJobDefaults(t *testing.T) {
	rj := workload.NewRayJob("r", "ns").Obj()
	if !rj.Spec.Suspend || !rj.Spec.ShutdownAfterJobFinishes {
		t.Errorf("suspend %v, shutdownAfterJobFinishes %v: Kueue needs both true", rj.Spec.Suspend, rj.Spec.ShutdownAfterJobFinishes)
	}
	if rj.Spec.SubmissionMode != rayv1.K8sJobMode {
		t.Errorf("submissionMode %q, want K8sJobMode (a submitter Job)", rj.Spec.SubmissionMode)
	}
	if want := `python -c "import sys, time; time.sleep(1); sys.exit(0)"`; rj.Spec.Entrypoint != want {
		t.Errorf("entrypoint %q, want %q", rj.Spec.Entrypoint, want)
	}
	cs := rj.Spec.RayClusterSpec
	if cs == nil || cs.RayVersion != workload.DefaultRayVersion || len(cs.WorkerGroupSpecs) != 1 {
		t.Fatalf("rayClusterSpec %+v", cs)
	}
	g := cs.WorkerGroupSpecs[0]
	if *g.Replicas != 1 || *g.MinReplicas != 1 || *g.MaxReplicas != 1 || g.GroupName == "head" {
		t.Errorf("worker group %q: replicas %d min %d max %d", g.GroupName, *g.Replicas, *g.MinReplicas, *g.MaxReplicas)
	}
	for _, c := range []corev1.Container{cs.HeadGroupSpec.Template.Spec.Containers[0], g.Template.Spec.Containers[0], rj.Spec.SubmitterPodTemplate.Spec.Containers[0]} {
		if c.Image != workload.DefaultRayImage {
			t.Errorf("container %s image %q, want %q", c.Name, c.Image, workload.DefaultRayImage)
		}
	}
	if len(rj.Annotations) != 0 || len(rj.Spec.SubmitterPodTemplate.Annotations) != 0 {
		t.Errorf("annotations %v / %v, want none (the default run)", rj.Annotations, rj.Spec.SubmitterPodTemplate.Annotations)
	}
}

func TestRayJobRunForFailsQueue(t *testing.T) {
	rj := workload.NewRayJob("r", "ns").Queue("lq").WorkloadPriorityClass("high").Requests("500m", "1Gi").
		WorkerReplicas(3).RunFor(2500 * time.Millisecond).Fails().Image("example.com/ray:1").Obj()
	if rj.Labels["kueue.x-k8s.io/queue-name"] != "lq" || rj.Labels["kueue.x-k8s.io/priority-class"] != "high" {
		t.Errorf("labels %v", rj.Labels)
	}
	want := map[string]string{topology.AnnotationRunDuration: "2.5s", topology.AnnotationOutcome: topology.OutcomeFailed}
	if diff := cmp.Diff(want, rj.Annotations); diff != "" {
		t.Errorf("RayJob annotations (-want +got):\n%s", diff)
	}
	// The submitter waits for the Ray job and succeeds: only the duration.
	if diff := cmp.Diff(map[string]string{topology.AnnotationRunDuration: "2.5s"}, rj.Spec.SubmitterPodTemplate.Annotations); diff != "" {
		t.Errorf("submitter pod annotations (-want +got):\n%s", diff)
	}
	if want := `python -c "import sys, time; time.sleep(2.5); sys.exit(1)"`; rj.Spec.Entrypoint != want {
		t.Errorf("entrypoint %q, want %q", rj.Spec.Entrypoint, want)
	}
	cs := rj.Spec.RayClusterSpec
	if *cs.WorkerGroupSpecs[0].Replicas != 3 || *cs.WorkerGroupSpecs[0].MaxReplicas != 3 {
		t.Errorf("workers %d", *cs.WorkerGroupSpecs[0].Replicas)
	}
	for _, c := range []corev1.Container{cs.HeadGroupSpec.Template.Spec.Containers[0], cs.WorkerGroupSpecs[0].Template.Spec.Containers[0]} {
		if !c.Resources.Requests.Cpu().Equal(resource.MustParse("500m")) || !c.Resources.Requests.Memory().Equal(resource.MustParse("1Gi")) {
			t.Errorf("container %s requests %v", c.Name, c.Resources.Requests)
		}
		if c.Image != "example.com/ray:1" {
			t.Errorf("container %s image %q", c.Name, c.Image)
		}
	}
}

func TestRayObjReturnsAnIndependentCopy(t *testing.T) {
	b := workload.NewRayJob("r", "ns").RunFor(time.Second)
	first := b.Obj()
	first.Annotations["x"] = "y"
	first.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Image = "changed"
	second := b.Obj()
	if _, ok := second.Annotations["x"]; ok || second.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Image != workload.DefaultRayImage {
		t.Error("changing one Obj changed the builder")
	}
	cb := workload.NewRayCluster("c", "ns")
	c1 := cb.Obj()
	c1.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "changed"
	if cb.Obj().Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image != workload.DefaultRayImage {
		t.Error("changing one RayCluster Obj changed the builder")
	}
}

func TestRayCluster(t *testing.T) {
	rc := workload.NewRayCluster("c", "ns").Queue("lq").Requests("1", "").WorkerReplicas(0).Obj()
	if rc.Spec.Suspend == nil || !*rc.Spec.Suspend {
		t.Error("a built RayCluster must be created suspended")
	}
	if rc.Labels["kueue.x-k8s.io/queue-name"] != "lq" {
		t.Errorf("labels %v", rc.Labels)
	}
	if n := *rc.Spec.WorkerGroupSpecs[0].Replicas; n != 0 {
		t.Errorf("workers %d", n)
	}
	if req := rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Resources.Requests; !req.Cpu().Equal(resource.MustParse("1")) || len(req) != 1 {
		t.Errorf("head requests %v", req)
	}
}

func TestRayWorkerReplicasNegativeIsAnError(t *testing.T) {
	b := workload.NewRayCluster("c", "ns").WorkerReplicas(-1)
	if err := b.Err(); err == nil || !containsAll(err.Error(), `RayCluster "c"`, "WorkerReplicas", "-1", "negative") {
		t.Errorf("Err() = %v, want an error naming the RayCluster and WorkerReplicas", err)
	}
	if n := *b.Obj().Spec.WorkerGroupSpecs[0].Replicas; n != 1 {
		t.Errorf("workers after bad input = %d, want the default 1", n)
	}
}
