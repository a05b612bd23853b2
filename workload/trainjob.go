package workload

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// DefaultTrainingRuntime is the ClusterTrainingRuntime a built TrainJob
// refers to unless Runtime names another; NewClusterTrainingRuntime builds
// one by that name (it must exist on the manager and on every worker).
const DefaultTrainingRuntime = "mktk-trainer"

// Names in a built ClusterTrainingRuntime, as the Kubeflow Trainer expects
// them: its replicated job and container "node", labelled as the trainer
// step (trainer.kubeflow.org/trainjob-ancestor-step), which is where the
// Trainer puts a TrainJob's spec.trainer.
const (
	trainerNode          = "node"
	trainerAncestorLabel = "trainer.kubeflow.org/trainjob-ancestor-step"
	trainerAncestorStep  = "trainer"
	// trainerPatchManager owns the runtime patch that carries the run
	// annotations to the TrainJob's pods.
	trainerPatchManager = "testkit.multikueue.x-k8s.io/run"
)

// TrainJobBuilder builds a TrainJob (trainer.kubeflow.org/v1alpha1, Kubeflow
// Trainer v2), created suspended as Kueue expects, that refers to a
// ClusterTrainingRuntime (DefaultTrainingRuntime unless Runtime names
// another). Kueue's webhook sets spec.managedBy on the manager. It needs the
// topology's TrainJob integration (topology.IntegrationTrainJob).
//
// Its run is in spec.trainer: Image, the sleep command (exit 0, or 1 with
// Fails), Nodes and Requests (resourcesPerNode); the run annotations reach
// the pods through a runtime patch, for the local topology's KWOK Nodes.
type TrainJobBuilder struct {
	core
	job trainer.TrainJob
}

// NewTrainJob starts a TrainJob of one node that runs for DefaultRunDuration
// and succeeds.
func NewTrainJob(name, namespace string) *TrainJobBuilder {
	b := &TrainJobBuilder{job: trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{
				Name:     DefaultTrainingRuntime,
				APIGroup: ptr.To(trainer.GroupVersion.Group),
				Kind:     ptr.To(trainer.ClusterTrainingRuntimeKind),
			},
			Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1)},
			Suspend: ptr.To(true),
		},
	}}
	b.core = newCore(trainer.TrainJobKind, name)
	return b
}

// Runtime names the ClusterTrainingRuntime the TrainJob runs on.
func (b *TrainJobBuilder) Runtime(name string) *TrainJobBuilder {
	if name == "" {
		b.fail("Runtime", "the runtime name must not be empty")
		return b
	}
	b.job.Spec.RuntimeRef.Name = name
	return b
}

// Nodes sets spec.trainer.numNodes (at least 1).
func (b *TrainJobBuilder) Nodes(n int32) *TrainJobBuilder {
	if b.count("Nodes", n, 1) {
		b.job.Spec.Trainer.NumNodes = ptr.To(n)
	}
	return b
}

// Obj returns a copy of the TrainJob built so far.
func (b *TrainJobBuilder) Obj() *trainer.TrainJob {
	j := b.job.DeepCopy()
	b.finishMeta(&j.ObjectMeta)
	// The trainer's pod as a template, to reuse the run, then moved into
	// spec.trainer, where the Trainer takes it from.
	pod := podTemplate(trainerNode)
	b.finishRun(&pod)
	c := pod.Spec.Containers[0]
	j.Spec.Trainer.Image = ptr.To(c.Image)
	j.Spec.Trainer.Command = c.Command
	if len(c.Resources.Requests) > 0 {
		j.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Requests: c.Resources.Requests}
	}
	if len(pod.Annotations) > 0 {
		j.Spec.RuntimePatches = append(j.Spec.RuntimePatches, trainer.RuntimePatch{
			Manager: trainerPatchManager,
			TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
				Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
					Name: trainerNode,
					Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
						Template: &trainer.PodTemplatePatch{Metadata: &metav1.ObjectMeta{Annotations: pod.Annotations}},
					}},
				}}},
			}},
		})
	}
	return j
}

// NewClusterTrainingRuntime returns a ClusterTrainingRuntime for built
// TrainJobs: a JobSet of one replicated job "node" (the trainer step) whose
// pod runs DefaultImage with no restarts and backoffLimit 0; a TrainJob's
// spec.trainer sets the image, command, node count and requests. Create it on
// the manager and on every worker before the TrainJobs that refer to it.
func NewClusterTrainingRuntime(name string) *trainer.ClusterTrainingRuntime {
	pod := podTemplate(trainerNode)
	newRun().applyTo(&pod.Spec)
	return &trainer.ClusterTrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.ClusterTrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1)},
			Template: trainer.JobSetTemplateSpec{Spec: jobset.JobSetSpec{
				ReplicatedJobs: []jobset.ReplicatedJob{{
					Name:     trainerNode,
					Replicas: 1,
					Template: batchv1.JobTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainerAncestorLabel: trainerAncestorStep}},
						Spec: batchv1.JobSpec{
							Parallelism:  ptr.To[int32](1),
							Completions:  ptr.To[int32](1),
							BackoffLimit: ptr.To[int32](0),
							Template:     pod,
						},
					},
				}},
			}},
		},
	}
}
