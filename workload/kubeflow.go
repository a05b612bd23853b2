package workload

import (
	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The Kubeflow training-operator's jobs (kubeflow.org/v1): PyTorchJob,
// TFJob, XGBoostJob, PaddleJob and JAXJob. Each builder makes the job
// suspended, as Kueue expects (Kueue's webhook sets
// spec.runPolicy.managedBy on the manager), with backoffLimit 0 and the
// operator's default container name in every role, whose container sleeps
// for the run duration and exits 0, or 1 with Fails, restartPolicy Never:
// the operator fails the job on the first failed pod. Requests apply to every
// pod. Each needs its Kueue integration (topology.IntegrationPyTorchJob and
// so on).

// role is one replica type of a built Kubeflow job and its default count.
type role struct {
	typ      kftraining.ReplicaType
	replicas int32
}

// kubeflowSpecs builds the replica specs of the roles, each pod one
// container named container.
func kubeflowSpecs(container string, roles ...role) map[kftraining.ReplicaType]*kftraining.ReplicaSpec {
	specs := map[kftraining.ReplicaType]*kftraining.ReplicaSpec{}
	for _, r := range roles {
		specs[r.typ] = &kftraining.ReplicaSpec{
			Replicas:      ptr.To(r.replicas),
			RestartPolicy: kftraining.RestartPolicyNever,
			Template:      podTemplate(container),
		}
	}
	return specs
}

// kubeflowRunPolicy is a suspended run policy with no retries.
func kubeflowRunPolicy() kftraining.RunPolicy {
	return kftraining.RunPolicy{Suspend: ptr.To(true), BackoffLimit: ptr.To[int32](0)}
}

// setReplicas sets the role's count, if the role exists.
func setReplicas(specs map[kftraining.ReplicaType]*kftraining.ReplicaSpec, typ kftraining.ReplicaType, n int32) {
	if s, ok := specs[typ]; ok {
		s.Replicas = ptr.To(n)
	}
}

// finishSpecs makes every role's pods run the batch's run.
func (c *core) finishSpecs(specs map[kftraining.ReplicaType]*kftraining.ReplicaSpec) {
	for _, s := range specs {
		c.finishRun(&s.Template)
	}
}

func kubeflowMeta(name, namespace, kind string) (metav1.TypeMeta, metav1.ObjectMeta) {
	return metav1.TypeMeta{APIVersion: kftraining.GroupVersion.String(), Kind: kind},
		metav1.ObjectMeta{Name: name, Namespace: namespace}
}

// PyTorchJobBuilder builds a PyTorchJob: one master and one worker by
// default.
type PyTorchJobBuilder struct {
	core
	job kftraining.PyTorchJob
}

// NewPyTorchJob starts a PyTorchJob of one master and one worker that runs
// for DefaultRunDuration and succeeds.
func NewPyTorchJob(name, namespace string) *PyTorchJobBuilder {
	b := &PyTorchJobBuilder{}
	b.job.TypeMeta, b.job.ObjectMeta = kubeflowMeta(name, namespace, kftraining.PyTorchJobKind)
	b.job.Spec = kftraining.PyTorchJobSpec{
		RunPolicy: kubeflowRunPolicy(),
		PyTorchReplicaSpecs: kubeflowSpecs(kftraining.PyTorchJobDefaultContainerName,
			role{kftraining.PyTorchJobReplicaTypeMaster, 1}, role{kftraining.PyTorchJobReplicaTypeWorker, 1}),
	}
	b.core = newCore(kftraining.PyTorchJobKind, name)
	return b
}

// Workers sets the number of worker pods besides the master (0 or more).
func (b *PyTorchJobBuilder) Workers(n int32) *PyTorchJobBuilder {
	if b.count("Workers", n, 0) {
		setReplicas(b.job.Spec.PyTorchReplicaSpecs, kftraining.PyTorchJobReplicaTypeWorker, n)
	}
	return b
}

// Obj returns a copy of the PyTorchJob built so far.
func (b *PyTorchJobBuilder) Obj() *kftraining.PyTorchJob {
	j := b.job.DeepCopy()
	b.finishMeta(&j.ObjectMeta)
	b.finishSpecs(j.Spec.PyTorchReplicaSpecs)
	return j
}

// TFJobBuilder builds a TFJob: one worker by default.
type TFJobBuilder struct {
	core
	job kftraining.TFJob
}

// NewTFJob starts a TFJob of one worker that runs for DefaultRunDuration and
// succeeds.
func NewTFJob(name, namespace string) *TFJobBuilder {
	b := &TFJobBuilder{}
	b.job.TypeMeta, b.job.ObjectMeta = kubeflowMeta(name, namespace, kftraining.TFJobKind)
	b.job.Spec = kftraining.TFJobSpec{
		RunPolicy:      kubeflowRunPolicy(),
		TFReplicaSpecs: kubeflowSpecs(kftraining.TFJobDefaultContainerName, role{kftraining.TFJobReplicaTypeWorker, 1}),
	}
	b.core = newCore(kftraining.TFJobKind, name)
	return b
}

// Workers sets the number of worker pods (at least 1).
func (b *TFJobBuilder) Workers(n int32) *TFJobBuilder {
	if b.count("Workers", n, 1) {
		setReplicas(b.job.Spec.TFReplicaSpecs, kftraining.TFJobReplicaTypeWorker, n)
	}
	return b
}

// Obj returns a copy of the TFJob built so far.
func (b *TFJobBuilder) Obj() *kftraining.TFJob {
	j := b.job.DeepCopy()
	b.finishMeta(&j.ObjectMeta)
	b.finishSpecs(j.Spec.TFReplicaSpecs)
	return j
}

// XGBoostJobBuilder builds an XGBoostJob: one master and one worker by
// default.
type XGBoostJobBuilder struct {
	core
	job kftraining.XGBoostJob
}

// NewXGBoostJob starts an XGBoostJob of one master and one worker that runs
// for DefaultRunDuration and succeeds.
func NewXGBoostJob(name, namespace string) *XGBoostJobBuilder {
	b := &XGBoostJobBuilder{}
	b.job.TypeMeta, b.job.ObjectMeta = kubeflowMeta(name, namespace, kftraining.XGBoostJobKind)
	b.job.Spec = kftraining.XGBoostJobSpec{
		RunPolicy: kubeflowRunPolicy(),
		XGBReplicaSpecs: kubeflowSpecs(kftraining.XGBoostJobDefaultContainerName,
			role{kftraining.XGBoostJobReplicaTypeMaster, 1}, role{kftraining.XGBoostJobReplicaTypeWorker, 1}),
	}
	b.core = newCore(kftraining.XGBoostJobKind, name)
	return b
}

// Workers sets the number of worker pods besides the master (0 or more).
func (b *XGBoostJobBuilder) Workers(n int32) *XGBoostJobBuilder {
	if b.count("Workers", n, 0) {
		setReplicas(b.job.Spec.XGBReplicaSpecs, kftraining.XGBoostJobReplicaTypeWorker, n)
	}
	return b
}

// Obj returns a copy of the XGBoostJob built so far.
func (b *XGBoostJobBuilder) Obj() *kftraining.XGBoostJob {
	j := b.job.DeepCopy()
	b.finishMeta(&j.ObjectMeta)
	b.finishSpecs(j.Spec.XGBReplicaSpecs)
	return j
}

// PaddleJobBuilder builds a PaddleJob: one master and one worker by default.
type PaddleJobBuilder struct {
	core
	job kftraining.PaddleJob
}

// NewPaddleJob starts a PaddleJob of one master and one worker that runs for
// DefaultRunDuration and succeeds.
func NewPaddleJob(name, namespace string) *PaddleJobBuilder {
	b := &PaddleJobBuilder{}
	b.job.TypeMeta, b.job.ObjectMeta = kubeflowMeta(name, namespace, kftraining.PaddleJobKind)
	b.job.Spec = kftraining.PaddleJobSpec{
		RunPolicy: kubeflowRunPolicy(),
		PaddleReplicaSpecs: kubeflowSpecs(kftraining.PaddleJobDefaultContainerName,
			role{kftraining.PaddleJobReplicaTypeMaster, 1}, role{kftraining.PaddleJobReplicaTypeWorker, 1}),
	}
	b.core = newCore(kftraining.PaddleJobKind, name)
	return b
}

// Workers sets the number of worker pods besides the master (0 or more).
func (b *PaddleJobBuilder) Workers(n int32) *PaddleJobBuilder {
	if b.count("Workers", n, 0) {
		setReplicas(b.job.Spec.PaddleReplicaSpecs, kftraining.PaddleJobReplicaTypeWorker, n)
	}
	return b
}

// Obj returns a copy of the PaddleJob built so far.
func (b *PaddleJobBuilder) Obj() *kftraining.PaddleJob {
	j := b.job.DeepCopy()
	b.finishMeta(&j.ObjectMeta)
	b.finishSpecs(j.Spec.PaddleReplicaSpecs)
	return j
}

// JAXJobBuilder builds a JAXJob: one worker by default.
type JAXJobBuilder struct {
	core
	job kftraining.JAXJob
}

// NewJAXJob starts a JAXJob of one worker that runs for DefaultRunDuration
// and succeeds.
func NewJAXJob(name, namespace string) *JAXJobBuilder {
	b := &JAXJobBuilder{}
	b.job.TypeMeta, b.job.ObjectMeta = kubeflowMeta(name, namespace, kftraining.JAXJobKind)
	b.job.Spec = kftraining.JAXJobSpec{
		RunPolicy:       kubeflowRunPolicy(),
		JAXReplicaSpecs: kubeflowSpecs(kftraining.JAXJobDefaultContainerName, role{kftraining.JAXJobReplicaTypeWorker, 1}),
	}
	b.core = newCore(kftraining.JAXJobKind, name)
	return b
}

// Workers sets the number of worker pods (at least 1).
func (b *JAXJobBuilder) Workers(n int32) *JAXJobBuilder {
	if b.count("Workers", n, 1) {
		setReplicas(b.job.Spec.JAXReplicaSpecs, kftraining.JAXJobReplicaTypeWorker, n)
	}
	return b
}

// Obj returns a copy of the JAXJob built so far.
func (b *JAXJobBuilder) Obj() *kftraining.JAXJob {
	j := b.job.DeepCopy()
	b.finishMeta(&j.ObjectMeta)
	b.finishSpecs(j.Spec.JAXReplicaSpecs)
	return j
}
