package local

import (
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
	"github.com/multikueue-testkit/testkit/topology"
)

// TestRunnableIntegrations: the local topology refuses, naming the field, an
// integration whose controller it does not run, and takes those it runs.
func TestRunnableIntegrations(t *testing.T) {
	ok := runnable()
	if err := runnableIntegrations(ok); err != nil {
		t.Errorf("runnableIntegrations(%q) = %v", ok, err)
	}
	const unknown = "example.com/somejob"
	err := runnableIntegrations([]string{topology.IntegrationBatchJob, unknown})
	if err == nil || !strings.Contains(err.Error(), "Integrations[1]") || !strings.Contains(err.Error(), unknown) {
		t.Errorf("runnableIntegrations with %s = %v, want an error naming Integrations[1] and %q", unknown, err, unknown)
	}
	// A TrainJob runs as a JobSet: without the JobSet integration it is
	// refused, naming what it needs.
	err = runnableIntegrations([]string{topology.IntegrationBatchJob, topology.IntegrationTrainJob})
	if err == nil || !strings.Contains(err.Error(), "Integrations[1]") || !strings.Contains(err.Error(), topology.IntegrationJobSet) {
		t.Errorf("runnableIntegrations with TrainJob alone = %v, want an error naming Integrations[1] and %q", err, topology.IntegrationJobSet)
	}
}

// TestKubeflowIntegrationsGetTheirCRDsAndSchemes: each Kubeflow training job
// integration gets its CRD from the training-operator's module and its
// scheme in the operator's --enable-schemes; the MPIJob (the MPI operator's
// v2beta1, not the training-operator's v1) gets the MPI operator's CRD.
func TestKubeflowIntegrationsGetTheirCRDsAndSchemes(t *testing.T) {
	ins := []string{topology.IntegrationBatchJob, topology.IntegrationPyTorchJob, topology.IntegrationJAXJob, topology.IntegrationMPIJob}
	if got, want := strings.Join(kubeflowSchemes(ins), ","), "PyTorchJob,JAXJob"; got != want {
		t.Errorf("kubeflowSchemes = %s, want %s", got, want)
	}
	var files, mpi []string
	for _, src := range crdSources(ins, false, false, true, crdRoots{}) {
		switch src.module {
		case modsrc.TrainingOperator:
			files = append(files, src.files...)
		case modsrc.MPIOperator:
			mpi = append(mpi, src.files...)
		}
	}
	if got, want := strings.Join(files, ","), "kubeflow.org_pytorchjobs.yaml,kubeflow.org_jaxjobs.yaml"; got != want {
		t.Errorf("training-operator CRDs = %s, want %s", got, want)
	}
	if got, want := strings.Join(mpi, ","), "kubeflow.org_mpijobs.yaml"; got != want {
		t.Errorf("MPI operator CRDs = %s, want %s", got, want)
	}
}
