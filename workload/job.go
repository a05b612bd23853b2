package workload

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/topology"
)

// Labels Kueue reads on job objects, spelled out because Kueue declares
// them in pkg/controller/constants, outside its API (the library imports
// only Kueue's apis/; TestLabelsAreKueues checks them against Kueue's
// constants): QueueLabel sends a job to a LocalQueue, PriorityClassLabel
// names its WorkloadPriorityClass.
const (
	QueueLabel         = "kueue.x-k8s.io/queue-name"
	PriorityClassLabel = "kueue.x-k8s.io/priority-class"
)

// JobBuilder builds a batch/v1 Job. The Job is created suspended, as Kueue
// expects; the webhook sets spec.managedBy on the manager.
//
// A built Job runs the same way in the local topology and on a real cluster:
// RunFor and Fails set the run annotations (topology.AnnotationRunDuration,
// topology.AnnotationOutcome) on the Job and on its pod template (the local
// topology's KWOK Stage reads them on the pods), and the pod
// template, whose container (DefaultImage unless Image is called) sleeps for
// the run duration and exits 0, or 1 with Fails. The pod never restarts and
// backoffLimit is 0, so a real Job controller fails the Job on that exit.
//
// Bad input (a quantity that does not parse, a negative duration) never
// panics: it is left out of the Job and reported by Err.
type JobBuilder struct {
	badInput
	job batchv1.Job
	run run
}

// NewJob starts a Job with one pod, one container, no resource requests,
// that runs for DefaultRunDuration and succeeds.
func NewJob(name, namespace string) *JobBuilder {
	return &JobBuilder{
		badInput: badInput{kind: "Job", name: name},
		job: batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}, Annotations: map[string]string{}},
			Spec:       oneTaskJobSpec(true),
		},
		run: newRun(),
	}
}

// Queue sets the LocalQueue.
func (b *JobBuilder) Queue(q string) *JobBuilder { b.job.Labels[QueueLabel] = q; return b }

// Requests sets the container's CPU and memory requests (quantities; ""
// skips one). A quantity that does not parse, or a negative one, is reported
// by Err and leaves the requests as they were.
func (b *JobBuilder) Requests(cpu, memory string) *JobBuilder {
	b.setRequests(&b.job.Spec.Template.Spec.Containers[0].Resources.Requests, cpu, memory)
	return b
}

// Err returns the bad input the builder was given, each error naming the
// Job and the field, or nil; Obj builds the Job without it.
func (b *JobBuilder) Err() error { return b.err() }

// Parallelism sets spec.parallelism.
func (b *JobBuilder) Parallelism(n int32) *JobBuilder { b.job.Spec.Parallelism = ptr.To(n); return b }

// Completions sets spec.completions.
func (b *JobBuilder) Completions(n int32) *JobBuilder { b.job.Spec.Completions = ptr.To(n); return b }

// PriorityClass sets the pod template's priorityClassName.
func (b *JobBuilder) PriorityClass(name string) *JobBuilder {
	b.job.Spec.Template.Spec.PriorityClassName = name
	return b
}

// WorkloadPriorityClass sets Kueue's workload priority class label.
func (b *JobBuilder) WorkloadPriorityClass(name string) *JobBuilder {
	b.job.Labels[PriorityClassLabel] = name
	return b
}

// RunFor sets how long the Job runs: on the local topology's KWOK Nodes (the
// annotation on the pod template) and in the pod's sleep on a kubelet. A
// negative duration is reported by Err.
func (b *JobBuilder) RunFor(d time.Duration) *JobBuilder {
	if !b.runFor(&b.run, d) {
		return b
	}
	b.annotate(topology.AnnotationRunDuration, d.String())
	return b
}

// Fails makes the Job fail: its pod exits 1 (on KWOK Nodes too).
func (b *JobBuilder) Fails() *JobBuilder {
	b.run.fails = true
	b.annotate(topology.AnnotationOutcome, topology.OutcomeFailed)
	return b
}

// annotate sets a run annotation on the Job (what the test asked for, on
// the object it submitted) and on its pod template (KWOK reads it on the
// pods).
func (b *JobBuilder) annotate(k, v string) {
	b.job.Annotations[k] = v
	if b.job.Spec.Template.Annotations == nil {
		b.job.Spec.Template.Annotations = map[string]string{}
	}
	b.job.Spec.Template.Annotations[k] = v
}

// Image sets the container image for real clusters (default DefaultImage);
// it must have sh and sleep. The local topology runs no pods and ignores it.
func (b *JobBuilder) Image(image string) *JobBuilder { b.run.image = image; return b }

// RequiredTopology asks Kueue's Topology-Aware Scheduling to place all the
// Job's pods within one domain of the level (a node label key, e.g.
// kubernetes.io/hostname): the pod template's
// kueue.x-k8s.io/podset-required-topology annotation.
func (b *JobBuilder) RequiredTopology(level string) *JobBuilder {
	if b.job.Spec.Template.Annotations == nil {
		b.job.Spec.Template.Annotations = map[string]string{}
	}
	b.job.Spec.Template.Annotations[kueue.PodSetRequiredTopologyAnnotation] = level
	return b
}

// Label sets a label.
func (b *JobBuilder) Label(k, v string) *JobBuilder { b.job.Labels[k] = v; return b }

// Annotation sets an annotation.
func (b *JobBuilder) Annotation(k, v string) *JobBuilder { b.job.Annotations[k] = v; return b }

// Obj returns a copy of the built Job.
func (b *JobBuilder) Obj() *batchv1.Job {
	job := b.job.DeepCopy()
	b.run.applyTo(&job.Spec.Template.Spec)
	if b.run.fails {
		job.Spec.BackoffLimit = ptr.To[int32](0)
	}
	return job
}
