package workload

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/multikueue-testkit/testkit/topology"
)

// QueueLabel is the label that sends a job to a LocalQueue.
const QueueLabel = "kueue.x-k8s.io/queue-name"

// JobBuilder builds a batch/v1 Job. The Job is created suspended, as Kueue
// expects; the webhook sets spec.managedBy on the manager.
type JobBuilder struct{ job batchv1.Job }

// NewJob starts a Job with one pod, one container, no resource requests.
func NewJob(name, namespace string) *JobBuilder {
	return &JobBuilder{job: batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec:       oneTaskJobSpec(true),
	}}
}

// oneTaskJobSpec is a Job spec of one pod with one container that exits, no
// retries and no resource requests.
func oneTaskJobSpec(suspend bool) batchv1.JobSpec {
	spec := batchv1.JobSpec{
		Parallelism:  ptr.To[int32](1),
		Completions:  ptr.To[int32](1),
		BackoffLimit: ptr.To[int32](0),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "c", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
				Args: []string{"entrypoint-tester"},
			}},
		}},
	}
	if suspend {
		spec.Suspend = ptr.To(true)
	}
	return spec
}

// Queue sets the LocalQueue.
func (b *JobBuilder) Queue(q string) *JobBuilder { b.job.Labels[QueueLabel] = q; return b }

// Requests sets the container's CPU and memory requests (quantities; "" skips one).
// It panics on a quantity that does not parse, as resource.MustParse does.
func (b *JobBuilder) Requests(cpu, memory string) *JobBuilder {
	b.job.Spec.Template.Spec.Containers[0].Resources.Requests = requests(cpu, memory)
	return b
}

// requests builds a ResourceList from CPU and memory quantities.
func requests(cpu, memory string) corev1.ResourceList {
	req := corev1.ResourceList{}
	if cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		req[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return req
}

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
	b.job.Labels["kueue.x-k8s.io/priority-class"] = name
	return b
}

// RunFor sets how long the local executor keeps the Job running.
func (b *JobBuilder) RunFor(d time.Duration) *JobBuilder {
	b.job.Annotations[topology.AnnotationRunDuration] = d.String()
	return b
}

// Fails makes the local executor fail the Job instead of succeeding it.
func (b *JobBuilder) Fails() *JobBuilder {
	b.job.Annotations[topology.AnnotationOutcome] = topology.OutcomeFailed
	return b
}

// Label sets a label.
func (b *JobBuilder) Label(k, v string) *JobBuilder { b.job.Labels[k] = v; return b }

// Annotation sets an annotation.
func (b *JobBuilder) Annotation(k, v string) *JobBuilder { b.job.Annotations[k] = v; return b }

// Obj returns a copy of the built Job.
func (b *JobBuilder) Obj() *batchv1.Job { return b.job.DeepCopy() }
