package workload

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/multikueue-testkit/testkit/topology"
)

// JobSetBuilder builds a JobSet (jobset.x-k8s.io/v1alpha2), created
// suspended as Kueue expects. It needs the topology's JobSet integration
// (topology.IntegrationJobSet); the local topology then runs the real JobSet
// controller on its workers, whose child Jobs run like any Job there.
//
// On a real cluster its pods run as JobBuilder's do: RunFor, Fails and Image
// set the pod template (sleep, then exit 0 or 1; restartPolicy Never,
// backoffLimit 0, and JobSet's default failure policy of no restarts fails
// the JobSet). RunFor and Fails also set the run annotations on the JobSet,
// on its Job template, so the child Jobs carry them, and on the pod
// template, for the local topology's KWOK Nodes.
//
// Bad input never panics: it is left out and reported by Err.
type JobSetBuilder struct {
	badInput
	js  jobset.JobSet
	run run
}

// NewJobSet starts a JobSet with one replicated job "workers" of one Job
// with one pod, no resource requests, that runs for DefaultRunDuration and
// succeeds.
func NewJobSet(name, namespace string) *JobSetBuilder {
	return &JobSetBuilder{
		badInput: badInput{kind: "JobSet", name: name},
		js: jobset.JobSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: jobset.GroupVersion.String(), Kind: "JobSet"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}, Annotations: map[string]string{}},
			Spec: jobset.JobSetSpec{
				Suspend: ptr.To(true),
				ReplicatedJobs: []jobset.ReplicatedJob{{
					Name:     "workers",
					Replicas: 1,
					Template: batchv1.JobTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}},
						Spec:       oneTaskJobSpec(false),
					},
				}},
			},
		},
		run: newRun(),
	}
}

// Queue sets the LocalQueue.
func (b *JobSetBuilder) Queue(q string) *JobSetBuilder { b.js.Labels[QueueLabel] = q; return b }

// Replicas sets how many Jobs the replicated job runs.
func (b *JobSetBuilder) Replicas(n int32) *JobSetBuilder {
	b.js.Spec.ReplicatedJobs[0].Replicas = n
	return b
}

// Requests sets the container's CPU and memory requests (quantities; ""
// skips one). A quantity that does not parse is reported by Err.
func (b *JobSetBuilder) Requests(cpu, memory string) *JobSetBuilder {
	b.setRequests(&b.js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Resources.Requests, cpu, memory)
	return b
}

// Err returns the bad input the builder was given, each error naming the
// JobSet and the field, or nil; Obj builds the JobSet without it.
func (b *JobSetBuilder) Err() error { return b.err() }

// RunFor sets how long each pod runs (its sleep) and the run-duration
// annotation. A negative duration is reported by Err.
func (b *JobSetBuilder) RunFor(d time.Duration) *JobSetBuilder {
	if !b.runFor(&b.run, d) {
		return b
	}
	b.annotate(topology.AnnotationRunDuration, d.String())
	return b
}

// Fails makes each pod exit 1, failing its Job and so the JobSet, and sets
// the outcome annotation.
func (b *JobSetBuilder) Fails() *JobSetBuilder {
	b.run.fails = true
	b.annotate(topology.AnnotationOutcome, topology.OutcomeFailed)
	return b
}

// Image sets the container image for real clusters (default DefaultImage);
// it must have sh and sleep.
func (b *JobSetBuilder) Image(image string) *JobSetBuilder { b.run.image = image; return b }

// annotate sets a run annotation on the JobSet, on its Job template (the
// child Jobs carry it) and on the pod template (KWOK reads it on the pods).
func (b *JobSetBuilder) annotate(k, v string) {
	b.js.Annotations[k] = v
	tmpl := &b.js.Spec.ReplicatedJobs[0].Template
	tmpl.Annotations[k] = v
	if tmpl.Spec.Template.Annotations == nil {
		tmpl.Spec.Template.Annotations = map[string]string{}
	}
	tmpl.Spec.Template.Annotations[k] = v
}

// Label sets a label on the JobSet.
func (b *JobSetBuilder) Label(k, v string) *JobSetBuilder { b.js.Labels[k] = v; return b }

// Obj returns a copy of the JobSet built so far.
func (b *JobSetBuilder) Obj() *jobset.JobSet {
	js := b.js.DeepCopy()
	tmpl := &js.Spec.ReplicatedJobs[0].Template.Spec
	b.run.applyTo(&tmpl.Template.Spec)
	if b.run.fails {
		tmpl.BackoffLimit = ptr.To[int32](0)
	}
	return js
}
