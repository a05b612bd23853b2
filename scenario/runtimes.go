package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/poll"
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

// ensureRuntime makes sure ClusterTrainingRuntime name exists on c and
// that c's Trainer knows it (RuntimeKnown).
func ensureRuntime(ctx context.Context, c *topology.Cluster, name, user string) error {
	err := c.Client.Get(ctx, types.NamespacedName{Name: name}, &trainer.ClusterTrainingRuntime{})
	if err == nil {
		return RuntimeKnown(ctx, c, name, time.Minute)
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
	return RuntimeKnown(ctx, c, name, time.Minute)
}

// RuntimeKnown waits, for at most timeout, until the Kubeflow Trainer on
// cluster c (if it runs one) knows ClusterTrainingRuntime name: a dry-run
// create of a TrainJob that refers to it passes the Trainer's validating
// webhook, which looks the runtime up in the cache its TrainJob controller
// reads too. A runtime created just before its TrainJobs arrive may not be
// in that cache yet; the Trainer then fails the TrainJob's reconcile and
// retries it with a backoff that doubles for as long as the cache lags,
// which under load outlasts a start timeout. Where no Trainer validates
// TrainJobs (the manager) the first dry run passes.
func RuntimeKnown(ctx context.Context, c *topology.Cluster, name string, timeout time.Duration) error {
	probe := workload.NewTrainJob("mktk-runtime-probe", "default").Runtime(name).Obj()
	what := fmt.Sprintf("cluster %q: the Kubeflow Trainer to know ClusterTrainingRuntime %q (a dry-run TrainJob create to pass its webhook)", c.Name, name)
	return poll.Until(ctx, timeout, what, func(ctx context.Context) error {
		err := c.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			return err // the webhook's "must be created before the TrainJob"
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return poll.Stop(err)
		}
		return nil
	})
}
