package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
)

// StressOptions shape Stress.
type StressOptions struct {
	// Dispatch is the load, submitted at once: Jobs jobs of each of Kinds
	// (default batch/Job only), interleaved. Their Workloads must exceed
	// what the manager's quota admits at once, unless Ample. Defaults: Jobs
	// 500; NamePrefix "stress"; CPU "1", Memory "100Mi"; RunFor 1s. Fails and
	// StartTimeout must be unset.
	Dispatch DispatchOptions
	// Ample turns the stress into a throughput run in the shape of Kueue's
	// own MultiKueue performance test (kubernetes-sigs/kueue#13936): the
	// manager's quota and every worker's must each fit all Workloads at
	// once, and no exhaustion is looked for.
	Ample bool
	// Concurrency is how many creations are in flight at once; default 50.
	Concurrency int
}

// StressResult is what Stress measured.
type StressResult struct {
	DispatchResult
	Workers int
	// ManagerSlots and WorkerSlots: how many jobs the manager and all
	// workers fit at once.
	ManagerSlots, WorkerSlots int
	// Submit is the time to create every job; Run from the first creation
	// until every Workload was Finished on the manager.
	Submit, Run time.Duration
	// PeakQueued is the most Workloads queued on the manager at once;
	// Exhausted says when the manager was full with Workloads queued.
	PeakQueued int
	Exhausted  string
	// Assertions is what judging took, per assertion, after the run.
	Assertions []AssertionCost
	// SyncLag is how long after each remote job's final state the manager's
	// job showed its own (assert.Checker.SyncLag): the median and the
	// longest, over the workloads where both were recorded.
	SyncLag LagSummary
	// Cleanup is how long after the run MultiKueue took to remove every
	// remote copy (NoOrphans then judges at once).
	Cleanup time.Duration
}

// LagSummary summarizes lags.
type LagSummary struct {
	Median, Max time.Duration
	// Measured is how many lags were read; the others lacked a final state.
	Measured int
}

// AssertionCost is the time one assertion took over a stress run.
type AssertionCost struct {
	Name   string
	Calls  int
	Failed int
	Total  time.Duration
}

// PerCall is the mean time of one call.
func (c AssertionCost) PerCall() time.Duration {
	if c.Calls == 0 {
		return 0
	}
	return c.Total / time.Duration(c.Calls)
}

// Judging is the time every assertion took together.
func (r StressResult) Judging() time.Duration {
	var d time.Duration
	for _, c := range r.Assertions {
		d += c.Total
	}
	return d
}

// Stress is the stress scenario: it submits Workloads jobs to the manager
// concurrently (Concurrency creations in flight), more than its quota
// admits at once, waits until every Workload is Finished (the run; for as
// long as one more finishes within the Checker's timeout), and
// then judges every workload with every per-workload assertion
// (ExactlyOnceAdmitted, NominationCleared, LosersCleaned, StatusSynced,
// Finished; one assertion at a time over all workloads, timed) and the
// topology with QuotaRespected (over the whole run) and NoOrphans. It checks
// from the history that Workloads queued on the manager while it was full
// (quota exhaustion). The error joins every failed check; the result has
// the durations and each assertion's cost.
func Stress(ctx context.Context, env *Env, o StressOptions) (StressResult, error) {
	r, err := begin(env, "Stress")
	if err != nil {
		return StressResult{}, err
	}
	res := StressResult{Workers: len(env.Topo.Workers)}
	if o.Concurrency <= 0 {
		o.Concurrency = 50
	}
	d := o.Dispatch
	if err := d.use(r.name, "StressOptions.Dispatch", DispatchOptions{Jobs: 500, Kinds: []observe.Kind{observe.KindJob}, NamePrefix: "stress", CPU: "1", Memory: "100Mi"},
		map[string]string{"Fails": "its jobs must finish for the run to end", "StartTimeout": "its waits are bounded by the Checker's Timeout"}); err != nil {
		return res, err
	}
	kinds, err := r.dispatchKinds(&d, "StressOptions.Dispatch")
	if err != nil {
		return res, err
	}
	workloads := d.Jobs * len(kinds)
	perWorker := map[string]int{}
	if res.ManagerSlots, perWorker, err = r.capacityPerWorker(ctx, "StressOptions.Dispatch", d.CPU, d.Memory); err != nil {
		return res, err
	}
	for _, n := range perWorker {
		res.WorkerSlots += n
	}
	if res.ManagerSlots == 0 || res.WorkerSlots == 0 {
		return res, r.errorf("a job of %s CPU and %s memory fits %d times on the manager and %d times on the workers; both must be at least 1", d.CPU, d.Memory, res.ManagerSlots, res.WorkerSlots)
	}
	switch {
	case o.Ample && workloads > res.ManagerSlots:
		return res, r.errorf("StressOptions.Ample: the manager's quota fits %d of the %d Workloads at once, not all", res.ManagerSlots, workloads)
	case o.Ample:
		for _, w := range env.Topo.Workers {
			if n := perWorker[w.Name]; n < workloads {
				return res, r.errorf("StressOptions.Ample: worker %q's quota fits %d of the %d Workloads at once, not all", w.Name, n, workloads)
			}
		}
	case workloads <= res.ManagerSlots:
		return res, r.errorf("StressOptions.Dispatch.Jobs: %d Workloads do not exhaust the manager's quota (it fits %d at once)", workloads, res.ManagerSlots)
	}
	tmpls := d.templates(r.namespace(d.Namespace), kinds)
	objs, err := r.build(tmpls)
	if err != nil {
		return res, err
	}
	res.Objects = objs
	for _, ob := range objs {
		res.Jobs = append(res.Jobs, jobOf(ob)...)
	}

	// The run: every Workload Finished, waiting as long as Workloads keep
	// finishing (the Checker's timeout without progress fails).
	start := time.Now()
	if err := r.submitN(ctx, objs, o.Concurrency); err != nil {
		return res, err
	}
	res.Submit = time.Since(start)
	if err := r.allFinished(ctx, objs); err != nil {
		res.Run = time.Since(start)
		return res, err
	}
	res.Run = time.Since(start)
	// MultiKueue's cleanup of the remote copies is the system's time, not
	// the judging's: NoOrphans waits for it here; judged again below, once
	// the copies are gone, it costs only its reading.
	t0 := time.Now()
	cleanupErr := r.chk.NoOrphans(ctx)
	res.Cleanup = time.Since(t0)

	// Judging, one assertion at a time over every workload.
	var errs []error
	per := []check{
		{name: "ExactlyOnceAdmitted", fn: r.chk.ExactlyOnceAdmitted},
		{name: "NominationCleared", fn: r.chk.NominationCleared},
		{name: "LosersCleaned", fn: r.chk.LosersCleaned},
		{name: "StatusSynced", fn: r.chk.StatusSynced},
		{name: "Finished", fn: r.chk.Finished},
	}
	for _, c := range per {
		cost := AssertionCost{Name: c.name}
		t0 := time.Now()
		for _, ob := range objs {
			cost.Calls++
			if err := c.fn(ctx, ob); err != nil {
				cost.Failed++
				errs = append(errs, err)
			}
		}
		cost.Total = time.Since(t0)
		res.Assertions = append(res.Assertions, cost)
	}
	for _, c := range []struct {
		name string
		fn   func(context.Context) error
	}{{name: "QuotaRespected", fn: r.chk.QuotaRespected}, {"NoOrphans", func(ctx context.Context) error {
		if cleanupErr != nil {
			return cleanupErr // it waited its grace already; its cost is the Cleanup
		}
		return r.chk.NoOrphans(ctx)
	}}} {
		t0 := time.Now()
		err := c.fn(ctx)
		cost := AssertionCost{Name: c.name, Calls: 1, Total: time.Since(t0)}
		if err != nil {
			cost.Failed = 1
			errs = append(errs, err)
		}
		res.Assertions = append(res.Assertions, cost)
	}
	if !o.Ample {
		errs = append(errs, r.exhaustion(ctx, objs, &res))
	}
	res.SyncLag = r.syncLags(ctx, objs)
	res.Placement, res.Unrecorded = r.placements(ctx, objs)
	return res, errors.Join(errs...)
}

// Stress runs Stress and reports its error.
func (r *Runner) Stress(ctx context.Context, o StressOptions) (StressResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, Stress, o)
}

// allFinished waits until every object's manager Workload is Finished, for
// as long as one more finishes within the Checker's timeout; on a stall it
// returns the Finished failure of each unfinished one (at most 10).
func (r *run) allFinished(ctx context.Context, objs []client.Object) error {
	mgr := r.env.Topo.Manager.Name
	keys := make([]client.ObjectKey, len(objs))
	for i, o := range objs {
		k, err := r.workloadKey(ctx, o)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	done := make([]bool, len(objs))
	finished, last := 0, time.Now()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		for i, k := range keys {
			if done[i] {
				continue
			}
			evs, _ := r.env.Obs.History(observe.KindWorkload, k.Namespace, k.Name)
			for _, e := range evs {
				if e.Cluster == mgr && e.Type == observe.Finished {
					done[i], finished, last = true, finished+1, time.Now()
					break
				}
			}
		}
		if finished == len(objs) {
			return nil
		}
		if time.Since(last) > r.chk.Timeout {
			var left []client.Object
			for i, o := range objs {
				if !done[i] && len(left) < 10 {
					left = append(left, o)
				}
			}
			short := *r.chk
			short.Timeout = time.Second
			sr := &run{env: r.env, chk: &short, name: r.name, start: r.start}
			return errors.Join(r.errorf("%d of %d Workloads Finished, none more for %s", finished, len(objs), r.chk.Timeout),
				sr.judge(ctx, left, check{name: "Finished", fn: short.Finished}))
		}
		select {
		case <-ctx.Done():
			return r.errorf("%d of %d Workloads Finished: %w", finished, len(objs), ctx.Err())
		case <-t.C:
		}
	}
}

// submitN creates objs on the manager, n at a time.
func (r *run) submitN(ctx context.Context, objs []client.Object, n int) error {
	if err := r.ensureRuntimes(ctx, objs); err != nil {
		return err
	}
	mgr := r.env.Topo.Manager
	errs := make([]error, len(objs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
	for i, o := range objs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := mgr.Client.Create(ctx, o); err != nil {
				errs[i] = fmt.Errorf("cluster %q: create %s: %w", mgr.Name, ref(o), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// exhaustion checks from the history that Workloads queued on the manager
// while it was full.
func (r *run) exhaustion(ctx context.Context, objs []client.Object, res *StressResult) error {
	var evs []observe.Event
	for _, o := range objs {
		k, err := r.workloadKey(ctx, o)
		if err != nil {
			return err
		}
		h, _ := r.env.Obs.History(observe.KindWorkload, k.Namespace, k.Name)
		evs = append(evs, h...)
	}
	s := sweep(evs, r.env.Topo.Manager.Name)
	res.PeakQueued = s.peak.queued
	for _, p := range s.points {
		if p.queued > 0 && p.reserved >= res.ManagerSlots {
			res.Exhausted = fmt.Sprintf("at +%s: %d queued on the manager, %d reserved there (fits %d)", p.at.Sub(s.t0).Round(time.Millisecond), p.queued, p.reserved, res.ManagerSlots)
			return nil
		}
	}
	return r.errorf("the manager's quota (%d jobs) was never exhausted with Workloads queued (peaks: %d queued, %d reserved)", res.ManagerSlots, s.peak.queued, s.peak.reserved)
}

// syncLags reads every object's sync lag from the history.
func (r *run) syncLags(ctx context.Context, objs []client.Object) LagSummary {
	var lags []time.Duration
	for _, o := range objs {
		if lag, ok := r.chk.SyncLag(ctx, o); ok {
			lags = append(lags, lag)
		}
	}
	if len(lags) == 0 {
		return LagSummary{}
	}
	slices.Sort(lags)
	return LagSummary{Median: lags[len(lags)/2], Max: lags[len(lags)-1], Measured: len(lags)}
}
