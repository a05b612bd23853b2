package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	lws "sigs.k8s.io/lws/api/leaderworkerset/v1"
)

// The serving kinds: Deployment, StatefulSet and LeaderWorkerSet. Their pods
// do not finish: each container runs until it is terminated (exit 0 on
// SIGTERM), restartPolicy Always, so these builders have no RunFor or
// Fails. Kueue's webhook copies the queue label to the pod template; the
// pods are admitted through the pod integration (a Deployment's one workload
// per pod, a StatefulSet's and a LeaderWorkerSet's group's pods as one
// workload).
//
// Kueue documents what MultiKueue does not do for them: none of the three
// has spec.managedBy, so the manager's own controller owns the object's
// status there and Kueue does not copy the worker's (the StatefulSet and
// LeaderWorkerSet adapters skip the status sync, and a Deployment has no
// adapter at all: only its pods are dispatched). For the StatefulSet and
// the LeaderWorkerSet the assertions say so rather than fail
// (assert.Limitation); the local topology runs all three
// (kube-controller-manager's StatefulSet, Deployment and ReplicaSet
// controllers, the LeaderWorkerSet controller), and the Observer records a
// Deployment's pods as job objects of their own (observe.KindPod).

// servingLabel selects a built serving object's pods.
const servingLabel = "testkit.multikueue.x-k8s.io/app"

// serve makes a serving pod template: the label that selects it, the
// builder's requests and image, the serve command.
func (c *core) serve(t *corev1.PodTemplateSpec) {
	t.Labels = mergeInto(t.Labels, map[string]string{servingLabel: c.name})
	c.finishPod(t, serveCommand(), corev1.RestartPolicyAlways)
}

// DeploymentBuilder builds an apps/v1 Deployment of one replica. It needs
// the topology's Deployment integration (topology.IntegrationDeployment,
// with the pod integration).
type DeploymentBuilder struct {
	core
	d appsv1.Deployment
}

// NewDeployment starts a Deployment of one replica.
func NewDeployment(name, namespace string) *DeploymentBuilder {
	b := &DeploymentBuilder{d: appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{servingLabel: name}},
			Template: podTemplate(containerName),
		},
	}}
	b.core = newCore("Deployment", name)
	return b
}

// Replicas sets spec.replicas (0 or more).
func (b *DeploymentBuilder) Replicas(n int32) *DeploymentBuilder {
	if b.count("Replicas", n, 0) {
		b.d.Spec.Replicas = ptr.To(n)
	}
	return b
}

// Obj returns a copy of the Deployment built so far.
func (b *DeploymentBuilder) Obj() *appsv1.Deployment {
	d := b.d.DeepCopy()
	b.finishMeta(&d.ObjectMeta)
	b.serve(&d.Spec.Template)
	return d
}

// StatefulSetBuilder builds an apps/v1 StatefulSet of one replica whose pods
// Kueue admits as one group. It needs the topology's StatefulSet
// integration (topology.IntegrationStatefulSet, with the pod integration).
type StatefulSetBuilder struct {
	core
	s appsv1.StatefulSet
}

// NewStatefulSet starts a StatefulSet of one replica (its serviceName is its
// name; no Service is created).
func NewStatefulSet(name, namespace string) *StatefulSetBuilder {
	b := &StatefulSetBuilder{s: appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](1),
			ServiceName:         name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{servingLabel: name}},
			Template:            podTemplate(containerName),
		},
	}}
	b.core = newCore("StatefulSet", name)
	return b
}

// Replicas sets spec.replicas (0 or more).
func (b *StatefulSetBuilder) Replicas(n int32) *StatefulSetBuilder {
	if b.count("Replicas", n, 0) {
		b.s.Spec.Replicas = ptr.To(n)
	}
	return b
}

// Obj returns a copy of the StatefulSet built so far.
func (b *StatefulSetBuilder) Obj() *appsv1.StatefulSet {
	s := b.s.DeepCopy()
	b.finishMeta(&s.ObjectMeta)
	b.serve(&s.Spec.Template)
	return s
}

// LeaderWorkerSetBuilder builds a LeaderWorkerSet
// (leaderworkerset.x-k8s.io/v1) of one group of one leader and one worker
// (Size 2); each group is one Kueue workload. It needs the topology's
// LeaderWorkerSet integration (topology.IntegrationLeaderWorkerSet).
type LeaderWorkerSetBuilder struct {
	core
	l lws.LeaderWorkerSet
}

// NewLeaderWorkerSet starts a LeaderWorkerSet of one group of size 2.
func NewLeaderWorkerSet(name, namespace string) *LeaderWorkerSetBuilder {
	b := &LeaderWorkerSetBuilder{l: lws.LeaderWorkerSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: lws.GroupVersion.String(), Kind: "LeaderWorkerSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: lws.LeaderWorkerSetSpec{
			Replicas:      ptr.To[int32](1),
			StartupPolicy: lws.LeaderCreatedStartupPolicy,
			LeaderWorkerTemplate: lws.LeaderWorkerTemplate{
				Size:           ptr.To[int32](2),
				RestartPolicy:  lws.RecreateGroupOnPodRestart,
				LeaderTemplate: ptr.To(podTemplate(containerName)),
				WorkerTemplate: podTemplate(containerName),
			},
		},
	}}
	b.core = newCore("LeaderWorkerSet", name)
	return b
}

// Replicas sets how many groups run (0 or more).
func (b *LeaderWorkerSetBuilder) Replicas(n int32) *LeaderWorkerSetBuilder {
	if b.count("Replicas", n, 0) {
		b.l.Spec.Replicas = ptr.To(n)
	}
	return b
}

// Size sets how many pods a group has, the leader included (at least 1).
func (b *LeaderWorkerSetBuilder) Size(n int32) *LeaderWorkerSetBuilder {
	if b.count("Size", n, 1) {
		b.l.Spec.LeaderWorkerTemplate.Size = ptr.To(n)
	}
	return b
}

// Obj returns a copy of the LeaderWorkerSet built so far.
func (b *LeaderWorkerSetBuilder) Obj() *lws.LeaderWorkerSet {
	l := b.l.DeepCopy()
	b.finishMeta(&l.ObjectMeta)
	b.serve(l.Spec.LeaderWorkerTemplate.LeaderTemplate)
	b.serve(&l.Spec.LeaderWorkerTemplate.WorkerTemplate)
	return l
}
