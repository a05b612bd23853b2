package workload

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// WorkloadBuilder builds a standalone Kueue Workload (one pod set), for
// fault injection: a stray remote copy, a second admitted copy, a workload
// in a queue without admission checks.
type WorkloadBuilder struct {
	badInput
	wl kueue.Workload
}

// NewWorkload starts a Workload with one pod set of one pod.
func NewWorkload(name, namespace string) *WorkloadBuilder {
	return &WorkloadBuilder{badInput: badInput{kind: "Workload", name: name}, wl: kueue.Workload{
		TypeMeta:   metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}},
		Spec: kueue.WorkloadSpec{PodSets: []kueue.PodSet{{
			Name:  kueue.DefaultPodSetName,
			Count: 1,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			}},
		}}},
	}}
}

// Queue sets spec.queueName (the LocalQueue).
func (b *WorkloadBuilder) Queue(q string) *WorkloadBuilder {
	b.wl.Spec.QueueName = kueue.LocalQueueName(q)
	return b
}

// Requests sets the container's CPU and memory requests; a quantity that
// does not parse is reported by Err.
func (b *WorkloadBuilder) Requests(cpu, memory string) *WorkloadBuilder {
	b.setRequests(&b.wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests, cpu, memory)
	return b
}

// Err returns the bad input the builder was given, or nil.
func (b *WorkloadBuilder) Err() error { return b.err() }

// Label sets a label (for example kueue.x-k8s.io/multikueue-origin).
func (b *WorkloadBuilder) Label(k, v string) *WorkloadBuilder { b.wl.Labels[k] = v; return b }

// Obj returns a copy of the built Workload.
func (b *WorkloadBuilder) Obj() *kueue.Workload { return b.wl.DeepCopy() }
