package local

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/multikueue-testkit/testkit/internal/assets"
)

// The MPI operator (MPIJob, kubeflow.org/v2beta1) runs as a binary built from
// github.com/kubeflow/mpi-operator at the version the Kueue under test
// requires in its go.mod (v0.8.2 for v0.19.2), on every worker of a topology
// with the MPIJob integration: upstream's controller package under a main
// of this library's (internal/assets/mains), because upstream's serves its
// health check on the fixed port 8080, exits when that is taken, and elects
// a leader in a namespace of its own. No webhooks (it has none), its CRD
// from the same module (manifests/base). The manager's MPIJobs are
// MultiKueue's (spec.runPolicy.managedBy), which the operator leaves alone;
// the manager runs no operator. The operator creates a launcher Job, worker
// pods, a ConfigMap, a Secret and a Service; the Job controller runs the
// launcher, whose pod KWOK ends after its run duration (with the outcome
// the builder set), and the workers stay Running until the operator deletes
// them as the MPIJob ends.

// ensureMPIOperator finds or builds the MPI operator binary at the version
// the Kueue binary bin requires in its go.mod.
func ensureMPIOperator(ctx context.Context, ao assets.Options, bin assets.Kueue) (assets.Operator, error) {
	return ensureOperator(ctx, ao, bin, assets.MPIOperator())
}

// startMPIOperator starts worker lc's MPI operator.
func (lc *localCluster) startMPIOperator(ctx context.Context, op assets.Operator, o Options) error {
	b := &controllerBinary{name: "mpi-operator", cluster: lc.name, path: op.Path, version: op.Version,
		dir: filepath.Join(lc.cp.dir, "mpi-operator"), timeout: o.StartTimeout, noWebhooks: true}
	if err := b.allocate(lc.cp); err != nil {
		return err
	}
	kubeconfig := filepath.Join(b.dir, "mpi-operator.kubeconfig")
	if err := lc.cp.writeClientKubeconfig(kubeconfig, mpiOperatorUser, lc.cp.mpiOperator); err != nil {
		return err
	}
	b.configure = func() error {
		b.args = []string{
			"--kubeConfig=" + kubeconfig,
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", b.healthPort),
		}
		return nil
	}
	lc.mu.Lock()
	lc.binaries = append(lc.binaries, b)
	lc.mu.Unlock()
	return b.start(ctx)
}
