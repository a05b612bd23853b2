package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

// ensureRuntimes makes sure that the ClusterTrainingRuntime every TrainJob
// among objs refers to exists on the manager (Kueue reads it there to size
// the Workload) and on every worker (the Trainer builds the JobSet from it):
// workload.DefaultTrainingRuntime is created where it is missing, with
// workload.NewClusterTrainingRuntime; another name must exist already, and
// its absence is an error naming the cluster and the TrainJob.
func (r *run) ensureRuntimes(ctx context.Context, objs []client.Object) error {
	need := map[string]string{} // runtime name -> a TrainJob that names it
	for _, o := range objs {
		if tj, ok := o.(*trainer.TrainJob); ok && tj.Spec.RuntimeRef.Kind != nil && *tj.Spec.RuntimeRef.Kind == trainer.ClusterTrainingRuntimeKind {
			if _, seen := need[tj.Spec.RuntimeRef.Name]; !seen {
				need[tj.Spec.RuntimeRef.Name] = ref(tj)
			}
		}
	}
	if len(need) == 0 {
		return nil
	}
	names := make([]string, 0, len(need))
	for n := range need {
		names = append(names, n)
	}
	slices.Sort(names)
	clusters := append([]*topology.Cluster{r.env.Topo.Manager}, r.env.Topo.Workers...)
	var errs []error
	for _, c := range clusters {
		for _, n := range names {
			errs = append(errs, ensureRuntime(ctx, c, n, need[n]))
		}
	}
	return errors.Join(errs...)
}

// ensureRuntime makes sure ClusterTrainingRuntime name exists on c.
func ensureRuntime(ctx context.Context, c *topology.Cluster, name, user string) error {
	err := c.Client.Get(ctx, types.NamespacedName{Name: name}, &trainer.ClusterTrainingRuntime{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster %q: read ClusterTrainingRuntime %q (for %s): %w", c.Name, name, user, err)
	}
	if name != workload.DefaultTrainingRuntime {
		return fmt.Errorf("cluster %q: ClusterTrainingRuntime %q, which %s refers to, does not exist; create it on the manager and on every worker", c.Name, name, user)
	}
	if err := c.Client.Create(ctx, workload.NewClusterTrainingRuntime(name)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster %q: create ClusterTrainingRuntime %q (for %s): %w", c.Name, name, user, err)
	}
	return nil
}
