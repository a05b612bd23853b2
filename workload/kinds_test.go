package workload_test

import (
	"strings"
	"testing"
	"time"

	kfmpi "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

// built is one builder's output, reduced to what every kind shares.
type built struct {
	meta      metav1.ObjectMeta
	suspended bool
	pods      []corev1.PodTemplateSpec
	err       error
}

func tmpl(m metav1.ObjectMeta, s corev1.PodSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: m, Spec: s}
}

func kubeflowPods(specs map[kftraining.ReplicaType]*kftraining.ReplicaSpec) []corev1.PodTemplateSpec {
	var out []corev1.PodTemplateSpec
	for _, s := range specs {
		out = append(out, s.Template)
	}
	return out
}

// batchBuilder is a run-to-completion kind's builder B.
type batchBuilder[B any] interface {
	Queue(q string) B
	RunFor(d time.Duration) B
	Requests(cpu, memory string) B
	Fails() B
}

// batchCalls makes on b the calls batchKinds makes on every kind.
func batchCalls[B batchBuilder[B]](b B, d time.Duration, fails bool, cpu string) B {
	b.Queue("q").RunFor(d).Requests(cpu, "")
	if fails {
		b.Fails()
	}
	return b
}

// batchKinds builds every run-to-completion kind with the same calls (the
// AppWrapper's pods are inside its component's JSON: TestKindSpecificDefaults).
func batchKinds(d time.Duration, fails bool, cpu string) map[string]built {
	out := map[string]built{}
	{
		x := batchCalls(workload.NewMPIJob("j", "ns"), d, fails, cpu)
		o := x.Obj()
		out["MPIJob"] = built{o.ObjectMeta, *o.Spec.RunPolicy.Suspend, []corev1.PodTemplateSpec{o.Spec.MPIReplicaSpecs[kfmpi.MPIReplicaTypeLauncher].Template}, x.Err()}
	}
	{
		x := batchCalls(workload.NewPyTorchJob("j", "ns"), d, fails, cpu)
		o := x.Obj()
		out["PyTorchJob"] = built{o.ObjectMeta, *o.Spec.RunPolicy.Suspend, kubeflowPods(o.Spec.PyTorchReplicaSpecs), x.Err()}
	}
	{
		x := batchCalls(workload.NewTFJob("j", "ns"), d, fails, cpu)
		o := x.Obj()
		out["TFJob"] = built{o.ObjectMeta, *o.Spec.RunPolicy.Suspend, kubeflowPods(o.Spec.TFReplicaSpecs), x.Err()}
	}
	{
		x := batchCalls(workload.NewXGBoostJob("j", "ns"), d, fails, cpu)
		o := x.Obj()
		out["XGBoostJob"] = built{o.ObjectMeta, *o.Spec.RunPolicy.Suspend, kubeflowPods(o.Spec.XGBReplicaSpecs), x.Err()}
	}
	{
		x := batchCalls(workload.NewPaddleJob("j", "ns"), d, fails, cpu)
		o := x.Obj()
		out["PaddleJob"] = built{o.ObjectMeta, *o.Spec.RunPolicy.Suspend, kubeflowPods(o.Spec.PaddleReplicaSpecs), x.Err()}
	}
	{
		x := batchCalls(workload.NewJAXJob("j", "ns"), d, fails, cpu)
		o := x.Obj()
		out["JAXJob"] = built{o.ObjectMeta, *o.Spec.RunPolicy.Suspend, kubeflowPods(o.Spec.JAXReplicaSpecs), x.Err()}
	}
	{
		x := batchCalls(workload.NewPod("j", "ns"), d, fails, cpu)
		o := x.Obj()
		out["Pod"] = built{o.ObjectMeta, true, []corev1.PodTemplateSpec{tmpl(o.ObjectMeta, o.Spec)}, x.Err()}
	}
	{
		x := batchCalls(workload.NewPodGroup("j", "ns"), d, fails, cpu)
		pods := x.Objs()
		var ts []corev1.PodTemplateSpec
		for _, p := range pods {
			ts = append(ts, tmpl(p.ObjectMeta, p.Spec))
		}
		out["pod group"] = built{pods[0].ObjectMeta, true, ts, x.Err()}
	}
	return out
}

func TestBatchKindsDefaultsAndRun(t *testing.T) {
	for kind, b := range batchKinds(1500*time.Millisecond, true, "250m") {
		if b.err != nil {
			t.Errorf("%s: Err() = %v, want nil", kind, b.err)
		}
		if !b.suspended {
			t.Errorf("%s: not created suspended", kind)
		}
		if b.meta.Labels[workload.QueueLabel] != "q" {
			t.Errorf("%s: queue label %q", kind, b.meta.Labels[workload.QueueLabel])
		}
		if b.meta.Annotations[topology.AnnotationOutcome] != topology.OutcomeFailed || b.meta.Annotations[topology.AnnotationRunDuration] != "1.5s" {
			t.Errorf("%s: run annotations on the object %v", kind, b.meta.Annotations)
		}
		for _, p := range b.pods {
			c := p.Spec.Containers[0]
			if got := strings.Join(c.Command, " "); got != "sh -c sleep 1.5; exit 1" {
				t.Errorf("%s: command %q", kind, got)
			}
			if c.Image != workload.DefaultImage || p.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("%s: image %q restartPolicy %q", kind, c.Image, p.Spec.RestartPolicy)
			}
			if c.Resources.Requests.Cpu().String() != "250m" {
				t.Errorf("%s: cpu request %s", kind, c.Resources.Requests.Cpu())
			}
			if p.Annotations[topology.AnnotationRunDuration] != "1.5s" {
				t.Errorf("%s: pod annotations %v (KWOK reads the run there)", kind, p.Annotations)
			}
		}
	}
}

func TestBuildersReportBadInputNamingTheField(t *testing.T) {
	for kind, b := range batchKinds(-time.Second, false, "lots") {
		if b.err == nil {
			t.Errorf("%s: bad RunFor and Requests accepted", kind)
			continue
		}
		for _, want := range []string{kind + ` "j"`, "RunFor", "-1s", "Requests", `cpu "lots"`} {
			if !strings.Contains(b.err.Error(), want) {
				t.Errorf("%s: error %q does not name %q", kind, b.err, want)
			}
		}
		for _, p := range b.pods {
			if _, ok := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; ok {
				t.Errorf("%s: a bad request reached the pod", kind)
			}
		}
	}
	for name, err := range map[string]error{
		"MPIJob Workers":            workload.NewMPIJob("j", "ns").Workers(0).Err(),
		"TFJob Workers":             workload.NewTFJob("j", "ns").Workers(0).Err(),
		"PyTorchJob Workers":        workload.NewPyTorchJob("j", "ns").Workers(-1).Err(),
		"TrainJob Nodes":            workload.NewTrainJob("j", "ns").Nodes(0).Err(),
		"TrainJob Runtime":          workload.NewTrainJob("j", "ns").Runtime("").Err(),
		"AppWrapper Replicas":       workload.NewAppWrapper("j", "ns").Replicas(0).Err(),
		"pod group Size":            workload.NewPodGroup("j", "ns").Size(0).Err(),
		"Deployment Replicas":       workload.NewDeployment("j", "ns").Replicas(-1).Err(),
		"StatefulSet Image":         workload.NewStatefulSet("j", "ns").Image("").Err(),
		"LeaderWorkerSet Size":      workload.NewLeaderWorkerSet("j", "ns").Size(0).Err(),
		"Deployment Requests mem":   workload.NewDeployment("j", "ns").Requests("", "-1Gi").Err(),
		"Job Requests":              workload.NewJob("j", "ns").Requests("lots", "").Err(),
		"JobSet RunFor":             workload.NewJobSet("j", "ns").RunFor(-time.Second).Err(),
		"Workload Requests":         workload.NewWorkload("j", "ns").Requests("1", "x").Err(),
		"RayJob RunFor":             workload.NewRayJob("j", "ns").RunFor(-time.Second).Err(),
		"RayJob Requests":           workload.NewRayJob("j", "ns").Requests("??", "").Err(),
		"RayService WorkerReplicas": workload.NewRayService("j", "ns").WorkerReplicas(-2).Err(),
		"RayService ServeConfig":    workload.NewRayService("j", "ns").ServeConfig("").Err(),
	} {
		field := strings.Fields(name)[len(strings.Fields(name))-1]
		if field == "mem" {
			field = "memory"
		}
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: Err() = %v, want an error naming %s", name, err, field)
		}
	}
}

func TestKindSpecificDefaults(t *testing.T) {
	mpi := workload.NewMPIJob("m", "ns").Workers(3).Obj()
	if w := mpi.Spec.MPIReplicaSpecs[kfmpi.MPIReplicaTypeWorker]; *w.Replicas != 3 || w.Template.Spec.Containers[0].Command[2] == "sleep 1; exit 0" {
		t.Errorf("MPIJob workers: %d replicas, command %q (workers serve until the launcher ends)", *w.Replicas, w.Template.Spec.Containers[0].Command)
	}
	if *mpi.Spec.RunPolicy.CleanPodPolicy != kfmpi.CleanPodPolicyRunning {
		t.Errorf("MPIJob cleanPodPolicy %q", *mpi.Spec.RunPolicy.CleanPodPolicy)
	}
	pt := workload.NewPyTorchJob("p", "ns").Obj()
	for typ, s := range pt.Spec.PyTorchReplicaSpecs {
		if s.Template.Spec.Containers[0].Name != kftraining.PyTorchJobDefaultContainerName {
			t.Errorf("PyTorchJob %s container %q: the operator needs %q", typ, s.Template.Spec.Containers[0].Name, kftraining.PyTorchJobDefaultContainerName)
		}
	}
	tj := workload.NewTrainJob("t", "ns").RunFor(2*time.Second).Requests("1", "").Nodes(2).Obj()
	if tj.Spec.RuntimeRef.Name != workload.DefaultTrainingRuntime || *tj.Spec.Trainer.NumNodes != 2 || tj.Spec.Trainer.Command[2] != "sleep 2; exit 0" {
		t.Errorf("TrainJob trainer %+v runtime %q", tj.Spec.Trainer, tj.Spec.RuntimeRef.Name)
	}
	if tj.Spec.Trainer.ResourcesPerNode.Requests.Cpu().String() != "1" || len(tj.Spec.RuntimePatches) != 1 {
		t.Errorf("TrainJob resources %v, %d runtime patches (the run annotations)", tj.Spec.Trainer.ResourcesPerNode, len(tj.Spec.RuntimePatches))
	}
	rt := workload.NewClusterTrainingRuntime(workload.DefaultTrainingRuntime)
	if rj := rt.Spec.Template.Spec.ReplicatedJobs; len(rj) != 1 || rj[0].Name != "node" || rj[0].Template.Spec.Template.Spec.Containers[0].Name != "node" {
		t.Errorf("ClusterTrainingRuntime replicated jobs %+v", rj)
	}
	aw := workload.NewAppWrapper("a", "ns").Replicas(2).Fails().Obj()
	if !aw.Spec.Suspend || len(aw.Spec.Components) != 1 || *aw.Spec.Components[0].DeclaredPodSets[0].Replicas != 2 {
		t.Fatalf("AppWrapper spec %+v", aw.Spec)
	}
	raw := string(aw.Spec.Components[0].Template.Raw)
	for _, want := range []string{`"kind":"Job"`, `"parallelism":2`, `exit 1`} {
		if !strings.Contains(raw, want) {
			t.Errorf("AppWrapper component %s lacks %s", raw, want)
		}
	}
	if strings.Contains(raw, "creationTimestamp") {
		t.Errorf("AppWrapper component carries a null creationTimestamp: %s", raw)
	}
	pods := workload.NewPodGroup("g", "ns").Size(3).Objs()
	if len(pods) != 3 || pods[2].Name != "g-2" || pods[0].Labels[workload.PodGroupNameLabel] != "g" || pods[1].Annotations[workload.PodGroupTotalCountAnnotation] != "3" {
		t.Errorf("pod group: %d pods, %s %v %v", len(pods), pods[len(pods)-1].Name, pods[0].Labels, pods[1].Annotations)
	}
	if _, ok := pods[0].Annotations[workload.PodGroupRetriableAnnotation]; ok {
		t.Errorf("a succeeding pod group's pod is marked unretriable: %v", pods[0].Annotations)
	}
	for _, p := range workload.NewPodGroup("g", "ns").Fails().Objs() {
		if p.Annotations[workload.PodGroupRetriableAnnotation] != "false" {
			t.Errorf("failing pod group's pod %s: annotations %v, want %s=false (else Kueue waits for a replacement)", p.Name, p.Annotations, workload.PodGroupRetriableAnnotation)
		}
	}
	d := workload.NewDeployment("d", "ns").Queue("q").Replicas(2).Obj()
	if d.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways || !metav1HasLabels(d.Spec.Selector, d.Spec.Template.Labels) || d.Labels[workload.QueueLabel] != "q" {
		t.Errorf("Deployment: restartPolicy %q, selector %v, template labels %v", d.Spec.Template.Spec.RestartPolicy, d.Spec.Selector, d.Spec.Template.Labels)
	}
	s := workload.NewStatefulSet("s", "ns").Obj()
	if !metav1HasLabels(s.Spec.Selector, s.Spec.Template.Labels) || s.Spec.ServiceName != "s" {
		t.Errorf("StatefulSet selector %v, labels %v, serviceName %q", s.Spec.Selector, s.Spec.Template.Labels, s.Spec.ServiceName)
	}
	l := workload.NewLeaderWorkerSet("l", "ns").Size(4).Obj()
	if *l.Spec.LeaderWorkerTemplate.Size != 4 || l.Spec.LeaderWorkerTemplate.LeaderTemplate == nil {
		t.Errorf("LeaderWorkerSet template %+v", l.Spec.LeaderWorkerTemplate)
	}
	rs := workload.NewRayService("r", "ns").Queue("q").Obj()
	if rs.Spec.RayClusterSpec.Suspend == nil || !*rs.Spec.RayClusterSpec.Suspend || rs.Labels[workload.QueueLabel] != "q" {
		t.Errorf("RayService cluster suspend %v, labels %v", rs.Spec.RayClusterSpec.Suspend, rs.Labels)
	}
	if rs.Spec.ServeConfigV2 != workload.DefaultServeConfig {
		t.Errorf("RayService serveConfigV2 %q, want DefaultServeConfig", rs.Spec.ServeConfigV2)
	}
}

func metav1HasLabels(sel *metav1.LabelSelector, labels map[string]string) bool {
	for k, v := range sel.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return len(sel.MatchLabels) > 0
}
