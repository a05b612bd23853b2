package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
)

// Provisioning is how the manager's quota compares with the workers'
// together, counted in jobs of the scenario's size.
type Provisioning string

const (
	// Balanced: the manager admits as many jobs as the workers can run (its
	// quota is the sum of theirs).
	Balanced Provisioning = "balanced"
	// UnderProvisioned: the manager admits fewer; jobs queue on the manager
	// although the workers have room.
	UnderProvisioned Provisioning = "under-provisioned"
	// OverProvisioned: the manager admits more; their copies pend on the
	// workers until a worker has room.
	OverProvisioned Provisioning = "over-provisioned"
)

// QuotaOptions shape Quota.
type QuotaOptions struct {
	// Dispatch is the load, batch/Jobs only (Kinds and Fails must be
	// unset), submitted at once. Defaults: Jobs twice the larger of the
	// manager's and the workers' capacity, so that quota runs out;
	// NamePrefix "quota"; CPU "1", Memory "100Mi"; RunFor 2s.
	Dispatch DispatchOptions
}

// QuotaResult is what Quota measured.
type QuotaResult struct {
	DispatchResult
	Provisioning Provisioning
	// ManagerSlots and WorkerSlots are how many of the scenario's jobs fit
	// the manager's ClusterQueue, and all workers' together.
	ManagerSlots, WorkerSlots int
	// Peaks over the run: Workloads holding a reservation on the manager;
	// Workloads admitted on some worker ("running"); copies admitted on the
	// workers (more than running while AllAtOnce races copies of one
	// Workload); Workloads queued on the manager (no reservation yet);
	// Workloads reserved on the manager with no admitted copy anywhere
	// ("starved").
	PeakManagerReserved, PeakRunning, PeakCopies, PeakQueued, PeakStarved int
	// Evidence describes the moment the provisioning's effect was seen.
	Evidence string
}

// Quota is the quota scenario. It reads the manager's and the workers'
// ClusterQueue quotas from the clusters, counts how many of its batch/Jobs
// (CPU and Memory each) fit each, and classifies the manager as Balanced
// (its quota is the workers' sum), UnderProvisioned or OverProvisioned.
// It submits more Jobs than fit at once and checks, for every Job,
// ExactlyOnceAdmitted, NominationCleared, LosersCleaned, Finished,
// StatusSynced and the outcome; QuotaRespected over the whole run (from the
// scenario's start) and NoOrphans; and the provisioning's effect, from the
// recorded history:
//
//   - Balanced: Jobs queued on the manager while it was full (queueing under
//     exhaustion);
//   - UnderProvisioned: Jobs queued on the full manager while the workers
//     had room (their admitted copies below their capacity);
//   - OverProvisioned: more Workloads reserved on the manager than the
//     workers fit, some with no admitted copy anywhere, while every worker
//     was full (their copies pending).
//
// The error joins every failed check.
func Quota(ctx context.Context, env *Env, o QuotaOptions) (QuotaResult, error) {
	r, err := begin(env, "Quota")
	if err != nil {
		return QuotaResult{}, err
	}
	d := o.Dispatch
	if err := d.use(r.name, "QuotaOptions.Dispatch", DispatchOptions{NamePrefix: "quota", CPU: "1", Memory: "100Mi", RunFor: 2 * time.Second},
		map[string]string{"Kinds": "it submits batch/Jobs only", "Fails": "its Jobs must succeed"}); err != nil {
		return QuotaResult{}, err
	}
	res := QuotaResult{}
	if res.ManagerSlots, res.WorkerSlots, err = r.capacity(ctx, "QuotaOptions.Dispatch", d.CPU, d.Memory); err != nil {
		return res, err
	}
	switch {
	case res.ManagerSlots == res.WorkerSlots:
		res.Provisioning = Balanced
	case res.ManagerSlots < res.WorkerSlots:
		res.Provisioning = UnderProvisioned
	default:
		res.Provisioning = OverProvisioned
	}
	if res.ManagerSlots == 0 || res.WorkerSlots == 0 {
		return res, r.errorf("a Job of %s CPU and %s memory fits %d times on the manager and %d times on the workers; both must be at least 1", d.CPU, d.Memory, res.ManagerSlots, res.WorkerSlots)
	}
	if d.Jobs == 0 {
		d.Jobs = 2 * max(res.ManagerSlots, res.WorkerSlots)
	}
	if d.Jobs <= min(res.ManagerSlots, res.WorkerSlots) {
		return res, r.errorf("QuotaOptions.Dispatch.Jobs: %d Jobs do not exhaust the quota (the manager fits %d, the workers %d)", d.Jobs, res.ManagerSlots, res.WorkerSlots)
	}
	objs, err := r.batchJobs(&d, "QuotaOptions.Dispatch")
	if err != nil {
		return res, err
	}
	res.DispatchResult, err = r.dispatch(ctx, objs, d)
	errs := []error{err}
	keys := make([]client.ObjectKey, 0, len(objs))
	for _, ob := range objs {
		k, err := r.workloadKey(ctx, ob)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		keys = append(keys, k)
	}
	errs = append(errs, r.provisioningEffect(&res, keys))
	return res, errors.Join(errs...)
}

// Quota runs Quota and reports its error.
func (r *Runner) Quota(ctx context.Context, o QuotaOptions) (QuotaResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, Quota, o)
}

// capacity returns how many jobs requesting cpu and memory fit the manager's
// ClusterQueue and all workers' together, from the quotas the clusters have.
func (r *run) capacity(ctx context.Context, field, cpu, memory string) (manager, workers int, err error) {
	manager, per, err := r.capacityPerWorker(ctx, field, cpu, memory)
	for _, n := range per {
		workers += n
	}
	return manager, workers, err
}

// capacityPerWorker is capacity with the workers' slots by worker name.
func (r *run) capacityPerWorker(ctx context.Context, field, cpu, memory string) (manager int, workers map[string]int, err error) {
	req := corev1.ResourceList{}
	for _, x := range []struct {
		name  corev1.ResourceName
		field string
		val   string
	}{{corev1.ResourceCPU, "CPU", cpu}, {corev1.ResourceMemory, "Memory", memory}} {
		q, err := resource.ParseQuantity(x.val)
		if err != nil || q.Sign() <= 0 {
			return 0, nil, r.errorf("%s.%s: %q is not a positive quantity", field, x.field, x.val)
		}
		req[x.name] = q
	}
	quotas, err := r.workerQuotas(ctx)
	if err != nil {
		return 0, nil, r.errorf("%w", err)
	}
	manager = slots(quotas[r.env.Topo.Manager.Name], req)
	workers = map[string]int{}
	for _, w := range r.env.Topo.Workers {
		workers[w.Name] = slots(quotas[w.Name], req)
	}
	return manager, workers, nil
}

// slots is how many times req fits limit (0 when a requested resource is
// not covered).
func slots(limit, req corev1.ResourceList) int {
	n := -1
	for name, q := range req {
		l, ok := limit[name]
		if !ok || q.MilliValue() == 0 {
			return 0
		}
		k := int(l.MilliValue() / q.MilliValue())
		if n < 0 || k < n {
			n = k
		}
	}
	return max(n, 0)
}

// provisioningEffect replays the Workloads' recorded history and checks the
// effect of the provisioning (see Quota).
func (r *run) provisioningEffect(res *QuotaResult, keys []client.ObjectKey) error {
	var evs []observe.Event
	for _, k := range keys {
		h, _ := r.env.Obs.History(observe.KindWorkload, k.Namespace, k.Name)
		evs = append(evs, h...)
	}
	return judgeProvisioning(res, sweep(evs, r.env.Topo.Manager.Name))
}

// judgeProvisioning records the peaks of s in res and checks that the
// effect of res.Provisioning was seen (see Quota).
func judgeProvisioning(res *QuotaResult, s sweepResult) error {
	res.PeakManagerReserved, res.PeakRunning, res.PeakCopies, res.PeakQueued, res.PeakStarved = s.peak.reserved, s.peak.running, s.peak.copies, s.peak.queued, s.peak.starved
	var want func(load) bool
	var what string
	switch res.Provisioning {
	case Balanced:
		want = func(l load) bool { return l.queued > 0 && l.reserved >= res.ManagerSlots }
		what = "Jobs queued on the manager while it was full"
	case UnderProvisioned:
		want = func(l load) bool {
			return l.queued > 0 && l.reserved >= res.ManagerSlots && l.copies < res.WorkerSlots
		}
		what = "Jobs queued on the full manager while the workers had room"
	case OverProvisioned:
		want = func(l load) bool {
			return l.starved > 0 && l.copies >= res.WorkerSlots && l.reserved > res.WorkerSlots
		}
		what = "more Workloads reserved on the manager than the workers fit, some with no admitted copy, while every worker was full"
	}
	for _, p := range s.points {
		if want(p.load) {
			res.Evidence = fmt.Sprintf("at +%s: %d queued on the manager, %d reserved there (fits %d), %d copies admitted on the workers (fit %d), %d reserved with no admitted copy",
				p.at.Sub(s.t0).Round(time.Millisecond), p.queued, p.reserved, res.ManagerSlots, p.copies, res.WorkerSlots, p.starved)
			return nil
		}
	}
	return fmt.Errorf("scenario Quota: %s manager (fits %d Jobs; the workers %d): never saw %s; peaks: %d reserved on the manager, %d running, %d copies admitted on the workers, %d queued on the manager, %d starved",
		res.Provisioning, res.ManagerSlots, res.WorkerSlots, what, res.PeakManagerReserved, res.PeakRunning, res.PeakCopies, res.PeakQueued, res.PeakStarved)
}

// load is the state of a set of Workloads at one moment.
type load struct {
	reserved int // holding a reservation on the manager
	queued   int // on the manager, no reservation, not finished
	running  int // with at least one copy holding a reservation on a worker
	copies   int // copies holding a reservation on workers
	starved  int // reserved on the manager, no copy holding one
}

type point struct {
	at time.Time
	load
}

type sweepResult struct {
	t0     time.Time
	points []point
	peak   load
}

// sweep replays Workload events (manager and copies, any number of
// Workloads) in time order and returns the load after each event.
func sweep(evs []observe.Event, manager string) sweepResult {
	slices.SortStableFunc(evs, func(a, b observe.Event) int { return a.Time.Compare(b.Time) })
	type wl struct {
		exists, reserved, finished bool
		copies                     map[string]bool // cluster -> holds a reservation
	}
	state := map[client.ObjectKey]*wl{}
	var out sweepResult
	for _, e := range evs {
		k := client.ObjectKey{Namespace: e.Namespace, Name: e.Name}
		w := state[k]
		if w == nil {
			w = &wl{copies: map[string]bool{}}
			state[k] = w
		}
		if e.Cluster == manager {
			switch e.Type {
			case observe.Created:
				w.exists = true
			case observe.QuotaReserved:
				w.reserved = true
			case observe.QuotaReleased:
				w.reserved = false
			case observe.Finished:
				w.reserved, w.finished = false, true
			case observe.Deleted:
				w.exists, w.reserved = false, false
			}
		} else {
			switch e.Type {
			case observe.QuotaReserved:
				w.copies[e.Cluster] = true
			case observe.QuotaReleased, observe.Finished, observe.Deleted:
				w.copies[e.Cluster] = false
			}
		}
		var l load
		for _, x := range state {
			held := 0
			for _, c := range x.copies {
				if c {
					held++
				}
			}
			l.copies += held
			if held > 0 {
				l.running++
			}
			switch {
			case x.reserved:
				l.reserved++
				if held == 0 {
					l.starved++
				}
			case x.exists && !x.finished:
				l.queued++
			}
		}
		if out.t0.IsZero() {
			out.t0 = e.Time
		}
		out.points = append(out.points, point{at: e.Time, load: l})
		out.peak.reserved = max(out.peak.reserved, l.reserved)
		out.peak.queued = max(out.peak.queued, l.queued)
		out.peak.running = max(out.peak.running, l.running)
		out.peak.copies = max(out.peak.copies, l.copies)
		out.peak.starved = max(out.peak.starved, l.starved)
	}
	return out
}
