package topology

import (
	kfmpi "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
)

// NewScheme returns a fresh scheme with every type a topology's clients use:
// core and batch (client-go), apiextensions, Kueue v1beta2 (and v1beta1),
// JobSet, Ray, the Kubeflow training jobs, the MPIJob, the TrainJob and its runtimes, the AppWrapper, the
// LeaderWorkerSet and ClusterProfile. Each call returns a new scheme; nothing is
// shared between topologies.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		kueue.AddToScheme,
		kueuev1beta1.AddToScheme,
		jobsetv1alpha2.AddToScheme,
		rayv1.AddToScheme,
		kftraining.AddToScheme,
		kfmpi.AddToScheme,
		trainer.AddToScheme,
		awv1beta2.AddToScheme,
		lwsv1.AddToScheme,
		inventoryv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}
