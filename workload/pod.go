package workload

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod-group keys Kueue reads on plain pods, spelled out because Kueue
// declares them in pkg/controller/jobs/pod/constants, outside its API
// (TestLabelsAreKueues checks them): a pod group is the pods that share
// PodGroupNameLabel, PodGroupTotalCountAnnotation of them, admitted as one
// workload.
const (
	PodGroupNameLabel            = "kueue.x-k8s.io/pod-group-name"
	PodGroupTotalCountAnnotation = "kueue.x-k8s.io/pod-group-total-count"
	// PodGroupRetriableAnnotation set to "false" on a group's pods tells
	// Kueue that a failed pod gets no replacement: once none is running, the
	// group is finished. Without it Kueue waits for a replacement for good.
	PodGroupRetriableAnnotation = "kueue.x-k8s.io/retriable-in-group"
)

// PodBuilder builds a plain Pod for Kueue's pod integration
// (topology.IntegrationPod): Kueue's webhook gates it
// (kueue.x-k8s.io/admission) until its workload is admitted; MultiKueue
// creates its copy on the worker. Its container sleeps for the run duration
// and exits 0, or 1 with Fails, restartPolicy Never; the run annotations are
// on the pod itself.
type PodBuilder struct {
	core
	pod corev1.Pod
}

// NewPod starts a Pod that runs for DefaultRunDuration and succeeds.
func NewPod(name, namespace string) *PodBuilder {
	b := &PodBuilder{pod: corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       podTemplate(containerName).Spec,
	}}
	b.core = newCore("Pod", name)
	return b
}

// Obj returns a copy of the Pod built so far.
func (b *PodBuilder) Obj() *corev1.Pod { return b.build(b.pod.DeepCopy()) }

// build finishes p: labels and annotations, then the run, which also
// annotates the pod.
func (b *PodBuilder) build(p *corev1.Pod) *corev1.Pod {
	t := corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}
	b.finishMeta(&t.ObjectMeta)
	b.finishRun(&t)
	p.ObjectMeta, p.Spec = t.ObjectMeta, t.Spec
	return p
}

// PodGroupBuilder builds a pod group: Size plain Pods "<name>-0" …
// sharing the group-name label and the total-count annotation, which Kueue
// admits as one workload and MultiKueue dispatches together. Each pod runs
// as a PodBuilder's does; with Fails each exits 1 and carries
// PodGroupRetriableAnnotation "false", so Kueue ends the group instead of
// waiting for replacement pods.
type PodGroupBuilder struct {
	core
	name, namespace string
	size            int32
}

// NewPodGroup starts a group of two pods that run for DefaultRunDuration and
// succeed.
func NewPodGroup(name, namespace string) *PodGroupBuilder {
	b := &PodGroupBuilder{name: name, namespace: namespace, size: 2}
	b.core = newCore("pod group", name)
	return b
}

// Size sets how many pods the group has (at least 1).
func (b *PodGroupBuilder) Size(n int32) *PodGroupBuilder {
	if b.count("Size", n, 1) {
		b.size = n
	}
	return b
}

// Objs returns copies of the group's pods, in index order.
func (b *PodGroupBuilder) Objs() []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, b.size)
	for i := int32(0); i < b.size; i++ {
		t := podTemplate(containerName)
		t.ObjectMeta = metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%d", b.name, i),
			Namespace:   b.namespace,
			Labels:      map[string]string{PodGroupNameLabel: b.name},
			Annotations: map[string]string{PodGroupTotalCountAnnotation: strconv.Itoa(int(b.size))},
		}
		if b.run.fails {
			t.Annotations[PodGroupRetriableAnnotation] = "false"
		}
		b.finishMeta(&t.ObjectMeta)
		b.finishRun(&t)
		pods = append(pods, &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: t.ObjectMeta,
			Spec:       t.Spec,
		})
	}
	return pods
}
