package scenario

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
)

// WorkerOverProvisionedOptions shape WorkerOverProvisioned.
type WorkerOverProvisionedOptions struct {
	// Dispatch is the load: batch/Jobs, as many as the workers' quotas fit,
	// held running until deleted, so Jobs, Kinds, RunFor, Fails and
	// StartTimeout must be unset. Defaults: NamePrefix "overprovisioned"; CPU "1", Memory "64Mi".
	Dispatch DispatchOptions
	// Hold is how long the pods that fit no Node are watched staying
	// Pending; default 10 s.
	Hold time.Duration
}

// WorkerOverProvisionedResult is what WorkerOverProvisioned saw.
type WorkerOverProvisionedResult struct {
	DispatchResult
	// QuotaSlots and NodeSlots are, per worker, how many of the Jobs its
	// ClusterQueue admits and its Nodes hold at once.
	QuotaSlots, NodeSlots map[string]int
	// Pending maps each Job ("Job default/overprovisioned-3") whose pod
	// stayed Pending on the worker that admitted it to the scheduler's
	// reason.
	Pending map[string]string
}

// WorkerOverProvisioned is the seed's "over-provisioned quota: dispatch
// of un-admittable workloads" on workers with Nodes: a worker whose
// ClusterQueue admits more than its Nodes hold takes the Workloads
// MultiKueue dispatches, and the pods of those beyond its Nodes never
// schedule. It reads each worker's quota and Nodes from the cluster
// (at least one must admit more than its Nodes hold), submits as many
// Jobs (running for an hour) as the workers' quotas admit together, and
// checks that each was admitted exactly once (ExactlyOnceAdmitted,
// NominationCleared, LosersCleaned) and that on each over-provisioned
// worker the pods beyond what its Nodes hold stayed Pending,
// Unschedulable, for Hold while their Workloads stayed Admitted there;
// then it deletes the Jobs and checks QuotaRespected and NoOrphans.
func WorkerOverProvisioned(ctx context.Context, env *Env, o WorkerOverProvisionedOptions) (WorkerOverProvisionedResult, error) {
	res := WorkerOverProvisionedResult{QuotaSlots: map[string]int{}, NodeSlots: map[string]int{}, Pending: map[string]string{}}
	r, err := begin(env, "WorkerOverProvisioned")
	if err != nil {
		return res, err
	}
	if o.Hold == 0 {
		o.Hold = 10 * time.Second
	}
	d := o.Dispatch
	if err := d.use(r.name, "WorkerOverProvisionedOptions.Dispatch", DispatchOptions{NamePrefix: "overprovisioned", Memory: "64Mi", RunFor: time.Hour},
		map[string]string{"Jobs": "it submits as many Jobs as the workers' quotas fit", "Kinds": "it submits batch/Jobs only",
			"RunFor": "its Jobs run until it deletes them", "Fails": "its Jobs must stay running", "StartTimeout": "its waits are bounded by the Checker's Timeout"}); err != nil {
		return res, err
	}
	if err := d.defaults(r.name, "WorkerOverProvisionedOptions.Dispatch", r.env.Topo.JobSize()); err != nil {
		return res, err
	}
	if _, res.QuotaSlots, err = r.capacityPerWorker(ctx, "WorkerOverProvisionedOptions.Dispatch", d.CPU, d.Memory); err != nil {
		return res, err
	}
	jobs, over := 0, 0
	for _, w := range env.Topo.Workers {
		n, err := nodeSlots(ctx, w.Client, d.CPU, d.Memory)
		if err != nil {
			return res, r.errorf("cluster %q: %w", w.Name, err)
		}
		if n == 0 {
			return res, r.errorf("cluster %q: no Node holds a Job of %s CPU and %s memory; the scenario needs Nodes on every worker (local.Options.Nodes), an empty pool would only wait", w.Name, d.CPU, d.Memory)
		}
		res.NodeSlots[w.Name] = n
		jobs += res.QuotaSlots[w.Name]
		if res.QuotaSlots[w.Name] > n {
			over++
		}
	}
	if over == 0 {
		return res, r.errorf("no worker's ClusterQueue admits more Jobs of %s CPU and %s memory than its Nodes hold (quota %v, Nodes %v)", d.CPU, d.Memory, res.QuotaSlots, res.NodeSlots)
	}
	ns := r.namespace(d.Namespace)
	tmpls := make([]JobTemplate, jobs)
	for i := range tmpls {
		tmpls[i] = JobTemplate{Kind: observe.KindJob, Name: fmt.Sprintf("%s-%d", d.NamePrefix, i), Namespace: ns, CPU: d.CPU, Memory: d.Memory, RunFor: d.RunFor}
	}
	objs, err := r.build(tmpls)
	if err != nil {
		return res, err
	}
	res.Objects = objs
	for _, ob := range objs {
		res.Jobs = append(res.Jobs, ob.(*batchv1.Job))
	}
	if err := r.submit(ctx, objs); err != nil {
		return res, err
	}
	errs := []error{r.judge(ctx, objs, r.placementChecks()...)}
	res.Placement, res.Unrecorded = r.placements(ctx, objs)
	errs = append(errs, r.heldPending(ctx, &res, o.Hold))
	for _, ob := range objs {
		if err := env.Topo.Manager.Client.Delete(ctx, ob, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			errs = append(errs, r.errorf("cluster %q: delete %s: %w", env.Topo.Manager.Name, ref(ob), err))
		}
	}
	errs = append(errs, r.chk.QuotaRespected(ctx), r.chk.NoOrphans(ctx))
	return res, errors.Join(errs...)
}

// WorkerOverProvisioned runs WorkerOverProvisioned and reports its error.
func (r *Runner) WorkerOverProvisioned(ctx context.Context, o WorkerOverProvisionedOptions) (WorkerOverProvisionedResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, WorkerOverProvisioned, o)
}

// heldPending waits until, on every worker, as many of the Jobs' pods run
// as its Nodes hold and the rest are Unschedulable, then checks that it
// stays so for hold, every Workload still Admitted on its worker.
func (r *run) heldPending(ctx context.Context, res *WorkerOverProvisionedResult, hold time.Duration) error {
	byWorker := map[string][]client.Object{}
	for _, ob := range res.Objects {
		if w, ok := res.Placement[ref(ob)]; ok {
			byWorker[w] = append(byWorker[w], ob)
		}
	}
	var errs []error
	for _, w := range r.env.Topo.Workers {
		jobs := byWorker[w.Name]
		want := max(0, len(jobs)-res.NodeSlots[w.Name])
		var pending map[string]string
		state := func(ctx context.Context) (running int, err error) {
			pending = map[string]string{}
			for _, ob := range jobs {
				var pods corev1.PodList
				if err := w.Client.List(ctx, &pods, client.InNamespace(ob.GetNamespace()), client.MatchingLabels{batchv1.JobNameLabel: ob.GetName()}); err != nil {
					return 0, err
				}
				for _, p := range pods.Items {
					switch {
					case p.Status.Phase == corev1.PodRunning:
						running++
					case p.Spec.NodeName == "":
						for _, c := range p.Status.Conditions {
							if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
								pending[ref(ob)] = c.Message
							}
						}
					}
				}
			}
			return running, nil
		}
		what := fmt.Sprintf("cluster %q: %d of its %d Jobs running (what its Nodes hold) and %d Unschedulable", w.Name, len(jobs)-want, len(jobs), want)
		err := poll.Until(ctx, r.chk.Timeout, what, func(ctx context.Context) error {
			running, err := state(ctx)
			if err != nil {
				return err
			}
			if running != len(jobs)-want || len(pending) != want {
				return fmt.Errorf("%d running, %d Unschedulable", running, len(pending))
			}
			return nil
		})
		if err != nil {
			errs = append(errs, r.errorf("%w", err))
			continue
		}
		// Held: it stays so, and Kueue on the worker keeps them Admitted.
		deadline := time.Now().Add(hold)
		for time.Now().Before(deadline) {
			running, err := state(ctx)
			if err == nil && (running != len(jobs)-want || len(pending) != want) {
				err = fmt.Errorf("%d running, %d Unschedulable within %s", running, len(pending), hold)
			}
			if err != nil {
				errs = append(errs, r.errorf("cluster %q: the pods did not stay as its Nodes allow: %w", w.Name, err))
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		for job, why := range pending {
			res.Pending[job] = why
		}
		keys := make([]string, 0, len(pending))
		for k := range pending {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, job := range keys {
			if !r.admittedOn(w.Name, job, res.Objects) {
				errs = append(errs, r.errorf("cluster %q: %s is Pending there but its Workload is not Admitted there", w.Name, job))
			}
		}
	}
	return errors.Join(errs...)
}

// admittedOn reports whether the job's Workload is Admitted on cluster by
// the Observer's last record.
func (r *run) admittedOn(cluster, job string, objs []client.Object) bool {
	for _, ob := range objs {
		if ref(ob) != job {
			continue
		}
		k, err := r.workloadKey(context.Background(), ob)
		if err != nil {
			return false
		}
		admitted := false
		evs, _ := r.env.Obs.History(observe.KindWorkload, k.Namespace, k.Name)
		for _, e := range evs {
			if e.Cluster != cluster {
				continue
			}
			switch e.Type {
			case observe.Admitted:
				admitted = true
			case observe.Evicted, observe.Finished, observe.Deleted:
				admitted = false
			}
		}
		return admitted
	}
	return false
}

// nodeSlots is how many pods requesting cpu and memory the cluster's Nodes
// hold at once (by their allocatable; what runs on them already is not
// subtracted).
func nodeSlots(ctx context.Context, cl client.Reader, cpu, memory string) (int, error) {
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes); err != nil {
		return 0, fmt.Errorf("list Nodes: %w", err)
	}
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	n := 0
	for _, node := range nodes.Items {
		n += slots(node.Status.Allocatable, req)
	}
	return n, nil
}
