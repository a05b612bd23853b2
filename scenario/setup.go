package scenario

import (
	"context"
	"errors"
)

// Setup is the setup-activation scenario: the MultiKueue setup is Active
// (assert SetupActive: every MultiKueueCluster Active/Active, the
// AdmissionCheck and every ClusterQueue Active, namespaces and LocalQueues
// mirrored, MultiKueue's credentials accepted by every worker with every
// permission it needs) and each worker's MultiKueueCluster is Active by its
// recorded history (ClusterActive). It submits nothing. The error joins
// every failed check.
func Setup(ctx context.Context, env *Env) error {
	r, err := begin(env, "Setup")
	if err != nil {
		return err
	}
	errs := []error{r.chk.SetupActive(ctx)}
	for _, w := range env.Topo.Workers {
		errs = append(errs, r.chk.ClusterActive(ctx, w.Name))
	}
	return errors.Join(errs...)
}

// Setup runs Setup and reports its error.
func (r *Runner) Setup(ctx context.Context) bool {
	r.rep.Helper()
	return r.report(Setup(ctx, r.env))
}
