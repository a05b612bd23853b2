package workload

import (
	kfmpi "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// MPIJobBuilder builds an MPIJob (kubeflow.org/v2beta1, the mpi-operator's),
// created suspended as Kueue expects, with one launcher and one worker
// (Workers changes it). Kueue's webhook sets spec.runPolicy.managedBy on the
// manager. It needs the topology's MPIJob integration
// (topology.IntegrationMPIJob).
//
// The launcher is what runs: its container sleeps for the run duration and
// exits 0, or 1 with Fails (restartPolicy Never, backoffLimit 0), and the
// mpi-operator ends the MPIJob with the launcher's Job. The workers run
// until the operator deletes them when the MPIJob ends (cleanPodPolicy
// Running). Requests apply to the launcher and to each worker.
type MPIJobBuilder struct {
	core
	job kfmpi.MPIJob
}

// Container name of a built MPIJob's pods.
const mpiContainer = "mpi"

// NewMPIJob starts an MPIJob of one launcher and one worker that runs for
// DefaultRunDuration and succeeds.
func NewMPIJob(name, namespace string) *MPIJobBuilder {
	b := &MPIJobBuilder{job: kfmpi.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kfmpi.SchemeGroupVersion.String(), Kind: kfmpi.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: kfmpi.MPIJobSpec{
			SlotsPerWorker: ptr.To[int32](1),
			RunPolicy: kfmpi.RunPolicy{
				Suspend:        ptr.To(true),
				BackoffLimit:   ptr.To[int32](0),
				CleanPodPolicy: ptr.To(kfmpi.CleanPodPolicyRunning),
			},
			MPIReplicaSpecs: map[kfmpi.MPIReplicaType]*kfmpi.ReplicaSpec{
				kfmpi.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), RestartPolicy: kfmpi.RestartPolicyNever, Template: podTemplate(mpiContainer)},
				kfmpi.MPIReplicaTypeWorker:   {Replicas: ptr.To[int32](1), RestartPolicy: kfmpi.RestartPolicyNever, Template: podTemplate(mpiContainer)},
			},
		},
	}}
	b.core = newCore("MPIJob", name)
	return b
}

// Workers sets the number of worker pods (at least 1).
func (b *MPIJobBuilder) Workers(n int32) *MPIJobBuilder {
	if b.count("Workers", n, 1) {
		b.job.Spec.MPIReplicaSpecs[kfmpi.MPIReplicaTypeWorker].Replicas = ptr.To(n)
	}
	return b
}

// Obj returns a copy of the MPIJob built so far.
func (b *MPIJobBuilder) Obj() *kfmpi.MPIJob {
	j := b.job.DeepCopy()
	b.finishMeta(&j.ObjectMeta)
	b.finishRun(&j.Spec.MPIReplicaSpecs[kfmpi.MPIReplicaTypeLauncher].Template)
	w := &j.Spec.MPIReplicaSpecs[kfmpi.MPIReplicaTypeWorker].Template
	b.finishPod(w, serveCommand(), corev1.RestartPolicyNever)
	return j
}
