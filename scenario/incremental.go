package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// IncrementalRoundTimeout is how long Kueue v0.17.0's Incremental dispatcher
// waits before it nominates the next round of workers. It is a constant in
// Kueue (pkg/controller/workloaddispatcher, incrementalDispatcherRoundTimeout)
// and cannot be configured.
const IncrementalRoundTimeout = 5 * time.Minute

// IncrementalOptions shape Incremental.
type IncrementalOptions struct {
	// Dispatch shapes the jobs of the rounds check (Jobs of each kind,
	// default 1; every field as for Dispatch).
	Dispatch DispatchOptions
	// Escalate also runs the escalation check, which takes more than
	// IncrementalRoundTimeout: one batch/Job sized to fit none of the first
	// round's workers (the first 3 Active workers by name) but a later one
	// must wait for the second round, IncrementalRoundTimeout after the
	// first, and be admitted by a worker of that round. It needs a worker
	// after the first 3 by name with more CPU quota than each of them.
	Escalate bool
}

// IncrementalResult is what Incremental saw.
type IncrementalResult struct {
	DispatchResult
	// Escalation, when Escalate was set: the escalating job and its rounds.
	Escalation *Escalation
}

// Escalation is the escalating job's history.
type Escalation struct {
	Job string
	// Rounds are the successive nominations, each with its time.
	Rounds []Round
	// Worker is where the job was admitted.
	Worker string
}

// Round is one nomination of the Incremental dispatcher.
type Round struct {
	At       time.Time
	Clusters []string
}

// Incremental is the Incremental-dispatcher scenario, on a topology whose
// manager runs that dispatcher: it runs Dispatch and checks for each job
// that its nominations grew in rounds of at most 3 Active workers in name
// order (DispatchedIncrementally). With Escalate it also checks the round
// timeout (see IncrementalOptions.Escalate). The error joins every failed
// check.
func Incremental(ctx context.Context, env *Env, o IncrementalOptions) (IncrementalResult, error) {
	r, err := begin(env, "Incremental")
	if err != nil {
		return IncrementalResult{}, err
	}
	if err := r.needDispatcher(topology.DispatcherIncremental); err != nil {
		return IncrementalResult{}, err
	}
	d := o.Dispatch
	kinds, err := r.dispatchKinds(&d, "IncrementalOptions.Dispatch")
	if err != nil {
		return IncrementalResult{}, err
	}
	var esc JobTemplate
	if o.Escalate {
		if esc, err = r.escalatingJob(ctx, d); err != nil {
			return IncrementalResult{}, err
		}
	}
	objs, err := r.build(d.templates(r.namespace(d.Namespace), kinds))
	if err != nil {
		return IncrementalResult{}, err
	}
	var res IncrementalResult
	res.DispatchResult, err = r.dispatch(ctx, objs, d)
	errs := []error{err, r.judge(ctx, objs, check{name: "DispatchedIncrementally", fn: r.chk.DispatchedIncrementally})}
	if o.Escalate {
		var escErr error
		res.Escalation, escErr = r.escalate(ctx, esc)
		errs = append(errs, escErr)
	}
	return res, errors.Join(errs...)
}

// Incremental runs Incremental and reports its error.
func (r *Runner) Incremental(ctx context.Context, o IncrementalOptions) (IncrementalResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, Incremental, o)
}

// workerQuotas returns each worker's ClusterQueue limit, read from the
// Observer's cache.
func (r *run) workerQuotas(ctx context.Context) (map[string]corev1.ResourceList, error) {
	out := map[string]corev1.ResourceList{}
	for _, c := range r.env.Topo.Clusters() {
		cq := &kueue.ClusterQueue{}
		if err := r.env.Obs.Reader(c.Name).Get(ctx, client.ObjectKey{Name: r.env.Topo.Spec.Queues.ClusterQueue}, cq); err != nil {
			return nil, fmt.Errorf("cluster %q: ClusterQueue %s: %w", c.Name, r.env.Topo.Spec.Queues.ClusterQueue, err)
		}
		out[c.Name], _ = observe.QuotaLimit(cq)
	}
	return out, nil
}

// escalatingJob sizes a Job that fits none of the first round's workers but
// a later one, and the manager.
func (r *run) escalatingJob(ctx context.Context, d DispatchOptions) (JobTemplate, error) {
	quotas, err := r.workerQuotas(ctx)
	if err != nil {
		return JobTemplate{}, err
	}
	active := r.activeWorkers()
	if len(active) <= assert.IncrementalRoundSize {
		return JobTemplate{}, r.errorf("escalation needs more than %d Active workers; %d are Active (%s)", assert.IncrementalRoundSize, len(active), strings.Join(active, ","))
	}
	first := active[:assert.IncrementalRoundSize]
	var most resource.Quantity
	for _, w := range first {
		if q := quotas[w][corev1.ResourceCPU]; q.Cmp(most) > 0 {
			most = q
		}
	}
	req := most.DeepCopy()
	req.Add(resource.MustParse("1"))
	fits := ""
	for _, w := range active[assert.IncrementalRoundSize:] {
		if q := quotas[w][corev1.ResourceCPU]; q.Cmp(req) >= 0 {
			fits = w
			break
		}
	}
	if fits == "" {
		return JobTemplate{}, r.errorf("escalation needs a worker after the first %d by name [%s] with at least %s CPU of quota, more than each of them (topology.Options.WorkerQuotas)",
			assert.IncrementalRoundSize, strings.Join(first, ","), req.String())
	}
	if q := quotas[r.env.Topo.Manager.Name][corev1.ResourceCPU]; q.Cmp(req) < 0 {
		return JobTemplate{}, r.errorf("escalation needs %s CPU of quota on the manager; it has %s (topology.Options.ManagerQuota)", req.String(), q.String())
	}
	return JobTemplate{Kind: observe.KindJob, Name: d.NamePrefix + "-escalates", Namespace: r.namespace(d.Namespace),
		CPU: req.String(), Memory: "100Mi", RunFor: d.RunFor}, nil
}

// activeWorkers returns the workers whose MultiKueueCluster is Active now
// (by the recorded history), sorted by name.
func (r *run) activeWorkers() []string {
	var out []string
	for _, w := range r.env.Topo.Workers {
		evs, _ := r.env.Obs.History(observe.KindMultiKueueCluster, "", w.Name)
		active := false
		for _, e := range evs {
			switch e.Type {
			case observe.ClusterActive:
				active = true
			case observe.ClusterInactive, observe.Deleted:
				active = false
			}
		}
		if active {
			out = append(out, w.Name)
		}
	}
	slices.Sort(out)
	return out
}

// escalate submits the escalating job and checks its rounds.
func (r *run) escalate(ctx context.Context, t JobTemplate) (*Escalation, error) {
	objs, err := r.build([]JobTemplate{t})
	if err != nil {
		return nil, err
	}
	// Waits include the round timeout.
	long := *r.chk
	long.Timeout = IncrementalRoundTimeout + r.chk.Timeout
	lr := &run{env: r.env, chk: &long, name: r.name, start: r.start}
	if err := lr.submit(ctx, objs); err != nil {
		return nil, err
	}
	o := objs[0]
	errs := []error{lr.judge(ctx, objs, append(lr.placementChecks(),
		check{name: "DispatchedIncrementally", fn: long.DispatchedIncrementally},
		check{name: "Finished", fn: long.Finished})...)}
	key, err := lr.workloadKey(ctx, o)
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	esc := &Escalation{Job: ref(o)}
	evs, _ := r.env.Obs.History(observe.KindWorkload, key.Namespace, key.Name)
	mgr := r.env.Topo.Manager.Name
	for _, e := range evs {
		if e.Cluster != mgr {
			continue
		}
		switch {
		case e.Type == observe.Nominated && len(e.Values) > 0 && esc.Worker == "":
			esc.Rounds = append(esc.Rounds, Round{At: e.Time, Clusters: slices.Clone(e.Values)})
		case e.ClusterName() != "" && esc.Worker == "":
			esc.Worker = e.Values[0]
		}
	}
	switch {
	case len(esc.Rounds) < 2:
		errs = append(errs, r.errorf("cluster %q: Workload %s of %s was nominated in %d round(s), want a second round after %s (it fits no worker of the first)", mgr, key, esc.Job, len(esc.Rounds), IncrementalRoundTimeout))
	default:
		if gap := esc.Rounds[1].At.Sub(esc.Rounds[0].At); gap < IncrementalRoundTimeout-assert.DefaultSkew {
			errs = append(errs, r.errorf("cluster %q: Workload %s: the second round came %s after the first, before the round timeout of %s", mgr, key, gap.Round(time.Millisecond), IncrementalRoundTimeout))
		}
		if slices.Contains(esc.Rounds[0].Clusters, esc.Worker) {
			errs = append(errs, r.errorf("cluster %q: Workload %s was placed on %q, a worker of the first round [%s] whose quota it does not fit", mgr, key, esc.Worker, strings.Join(esc.Rounds[0].Clusters, ",")))
		}
	}
	return esc, errors.Join(errs...)
}
