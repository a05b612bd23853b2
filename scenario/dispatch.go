package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/multikueue-testkit/testkit/workload"
)

// DispatchOptions shape DispatchJobs.
type DispatchOptions struct {
	// Jobs is how many batch/Jobs to submit at once; default 1.
	Jobs int
	// Namespace; default the topology's first queue namespace.
	Namespace string
	// NamePrefix for the Jobs; default "dispatch".
	NamePrefix string
	// CPU and Memory requested by each Job; default "1" and "1Gi".
	CPU, Memory string
	// RunFor is each Job's run time on the worker; default 1s.
	RunFor time.Duration
}

// DispatchResult lists the Jobs a dispatch created.
type DispatchResult struct {
	Jobs []*batchv1.Job
}

// DispatchJobs is the canonical MultiKueue behaviour for batch/Job: it
// submits the Jobs to the manager concurrently, then checks for each that it
// was admitted on exactly one worker whose name the manager's clusterName
// carries, with the remote Job labelled with the prebuilt workload name
// (ExactlyOnceAdmitted); that nominations were cleared once placed
// (NominationCleared); that the manager Workload finished (Finished); and
// finally that no remote Workload or Job is left on any worker (NoOrphans).
// The error joins every failed check.
func DispatchJobs(ctx context.Context, env *Env, o DispatchOptions) (DispatchResult, error) {
	if o.Jobs == 0 {
		o.Jobs = 1
	}
	if o.Jobs < 0 {
		return DispatchResult{}, fmt.Errorf("scenario: DispatchOptions.Jobs: %d is negative", o.Jobs)
	}
	if o.Namespace == "" {
		o.Namespace = env.Topo.Spec.Queues.Namespaces[0]
	}
	if o.NamePrefix == "" {
		o.NamePrefix = "dispatch"
	}
	if o.CPU == "" {
		o.CPU = "1"
	}
	if o.Memory == "" {
		o.Memory = "1Gi"
	}
	if o.RunFor == 0 {
		o.RunFor = time.Second
	}
	jobs := make([]*batchv1.Job, o.Jobs)
	for i := range jobs {
		jobs[i] = workload.NewJob(fmt.Sprintf("%s-%d", o.NamePrefix, i), o.Namespace).
			Queue(env.Topo.Spec.Queues.LocalQueue).Requests(o.CPU, o.Memory).RunFor(o.RunFor).Obj()
	}
	res := DispatchResult{Jobs: jobs}
	mgr := env.Topo.Manager
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			if err := mgr.Client.Create(ctx, j); err != nil {
				errs[i] = fmt.Errorf("cluster %q: create Job %s/%s: %w", mgr.Name, j.Namespace, j.Name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	for i, j := range jobs {
		wg.Go(func() {
			errs[i] = errors.Join(
				env.Check.ExactlyOnceAdmitted(ctx, j),
				env.Check.NominationCleared(ctx, j),
				env.Check.Finished(ctx, j),
			)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	return res, env.Check.NoOrphans(ctx)
}
