package workload

import (
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// JobSetBuilder builds a JobSet (jobset.x-k8s.io/v1alpha2), created
// suspended as Kueue expects. It needs the topology's JobSet integration
// (topology.IntegrationJobSet); the local topology runs no JobSet controller,
// so a JobSet is admitted and dispatched but does not run there.
type JobSetBuilder struct{ js jobset.JobSet }

// NewJobSet starts a JobSet with one replicated job "workers" of one Job
// with one pod, no resource requests.
func NewJobSet(name, namespace string) *JobSetBuilder {
	return &JobSetBuilder{js: jobset.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobset.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: jobset.JobSetSpec{
			Suspend: ptr.To(true),
			ReplicatedJobs: []jobset.ReplicatedJob{{
				Name:     "workers",
				Replicas: 1,
				Template: batchv1.JobTemplateSpec{Spec: oneTaskJobSpec(false)},
			}},
		},
	}}
}

// Queue sets the LocalQueue.
func (b *JobSetBuilder) Queue(q string) *JobSetBuilder { b.js.Labels[QueueLabel] = q; return b }

// Replicas sets how many Jobs the replicated job runs.
func (b *JobSetBuilder) Replicas(n int32) *JobSetBuilder {
	b.js.Spec.ReplicatedJobs[0].Replicas = n
	return b
}

// Requests sets the container's CPU and memory requests (quantities; ""
// skips one). It panics on a quantity that does not parse.
func (b *JobSetBuilder) Requests(cpu, memory string) *JobSetBuilder {
	b.js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Resources.Requests = requests(cpu, memory)
	return b
}

// Label sets a label on the JobSet.
func (b *JobSetBuilder) Label(k, v string) *JobSetBuilder { b.js.Labels[k] = v; return b }

// Obj returns a copy of the JobSet built so far.
func (b *JobSetBuilder) Obj() *jobset.JobSet { return b.js.DeepCopy() }
