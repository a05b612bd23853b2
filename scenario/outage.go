package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// MaxOutageWorkerLostTimeout is the longest workerLostTimeout WorkerOutage
// accepts: it waits that long for the in-flight work to be re-dispatched.
const MaxOutageWorkerLostTimeout = 5 * time.Minute

// HoldTimestampPrecision is how much shorter than workerLostTimeout after
// the placement a hold may be: Kueue times it from the admission check's
// lastTransitionTime, which the API stores to the second.
const HoldTimestampPrecision = time.Second

// KueueReconnectBackoffMax is the longest MultiKueue v0.17.0 waits between
// two attempts to reconnect to a worker (5s doubling per failed attempt, at
// most 7 steps: 5m20s). WorkerOutage waits that long, plus the Checker's
// timeout, for the worker to be Active again.
const KueueReconnectBackoffMax = 320 * time.Second

// DefaultRedispatchBound is how long after the end of its hold a workload
// on a lost worker may take to be evicted from it.
const DefaultRedispatchBound = 30 * time.Second

// OutageOptions shape WorkerOutage.
type OutageOptions struct {
	// Worker whose API server is stopped; default the worker running the
	// most of the scenario's Jobs once they are all placed.
	Worker string
	// Dispatch is the load submitted before the outage, batch/Jobs only
	// (Kinds, Fails and StartTimeout must be unset). Defaults: Jobs twice the number of
	// workers; NamePrefix "outage"; CPU "1", Memory "256Mi"; RunFor 10s, so
	// that the lost worker's Jobs are still running when it goes.
	Dispatch DispatchOptions
	// RedispatchBound: see DefaultRedispatchBound.
	RedispatchBound time.Duration
}

// OutageResult is what WorkerOutage saw.
type OutageResult struct {
	DispatchResult
	// Worker is the worker that was stopped.
	Worker string
	// Stopped and Restarted are when its API server was stopped and started
	// again; Inactive and Active when its MultiKueueCluster was recorded
	// Active=False after the stop and Active=True after the restart.
	Stopped, Restarted, Inactive, Active time.Time
	// InFlight are the Jobs placed on Worker and not finished at the stop,
	// each with when the manager evicted it from Worker (its hold ended) and
	// the worker it was placed on next.
	InFlight []Redispatch
}

// Redispatch is one in-flight Job's way off the lost worker.
type Redispatch struct {
	Job string
	// Placed is when the manager placed it on the lost worker.
	Placed time.Time
	// Released is when the manager let go of the lost worker (clusterName
	// reset or eviction): the end of the hold.
	Released time.Time
	// Next is the worker of its next placement.
	Next string
}

// Held is how long the Job stayed placed on the lost worker after it was
// stopped.
func (d Redispatch) Held(stopped time.Time) time.Duration { return d.Released.Sub(stopped) }

// WorkerOutage is the worker-outage scenario. It needs process control
// (Cluster.Lifecycle; NeedsLifecycleError without it) and a short
// workerLostTimeout (at most MaxOutageWorkerLostTimeout; the local topology
// takes topology.Options.Kueue.WorkerLostTimeout, e.g. 20s).
//
// It submits Jobs, waits until all are placed and one runs, then stops the
// API server of Worker (really: the process ends; etcd keeps the data) with
// its Jobs in flight, and checks:
//
//   - the worker's MultiKueueCluster goes Active=False (ClusterInactive);
//   - each in-flight Job is held: the manager keeps it placed on the lost
//     worker until workerLostTimeout after its placement (Kueue v0.17.0
//     times the hold from the admission check's last transition, not from
//     the loss, to the second: HoldTimestampPrecision), and re-dispatches it
//     after that: released within
//     RedispatchBound after max(stop, placement + workerLostTimeout) and
//     placed on another worker;
//
// then starts the API server again once every in-flight Job was placed
// elsewhere, and checks that the MultiKueueCluster is Active again
// (ClusterActive, waiting up to KueueReconnectBackoffMax more than usual), and for every Job ExactlyOnceAdmitted (per admission
// cycle: the re-dispatch is a new cycle), NominationCleared, LosersCleaned,
// Finished, StatusSynced and the outcome; QuotaRespected over the run and
// NoOrphans (the lost worker's stale copies removed after it returned). The
// error joins every failed check.
func WorkerOutage(ctx context.Context, env *Env, o OutageOptions) (OutageResult, error) {
	r, err := begin(env, "WorkerOutage")
	if err != nil {
		return OutageResult{}, err
	}
	ready := func() error {
		candidates, err := r.outageCandidates(o.Worker, "OutageOptions.Worker")
		if err != nil {
			return err
		}
		for _, w := range candidates {
			if _, err := r.lifecycle(w); err != nil {
				return err
			}
		}
		return nil
	}
	return r.lose(ctx, o, "OutageOptions", ready, func(ctx context.Context, victim *topology.Cluster) (func(context.Context) error, error) {
		lc, _ := r.lifecycle(victim)
		if err := lc.StopAPIServer(ctx); err != nil {
			return nil, r.errorf("cluster %q: stop the API server: %w", victim.Name, err)
		}
		return func(ctx context.Context) error {
			if err := lc.StartAPIServer(ctx); err != nil {
				return r.errorf("cluster %q: start the API server again: %w", victim.Name, err)
			}
			return nil
		}, nil
	})
}

// outageCandidates returns the workers a lost-worker scenario may take:
// want (named by field) or every worker.
func (r *run) outageCandidates(want, field string) ([]*topology.Cluster, error) {
	if want == "" {
		return r.env.Topo.Workers, nil
	}
	w := r.env.Topo.Worker(want)
	if w == nil {
		return nil, r.errorf("%s: %q is not a worker of the topology (%v)", field, want, r.env.Topo.Spec.WorkerNames)
	}
	return []*topology.Cluster{w}, nil
}

// lose runs a lost-worker scenario (WorkerOutage, Disconnect): the load,
// the victim, cut (which loses the victim and returns how to bring it
// back), the hold and re-dispatch of its in-flight Jobs, the return, and
// every check. opts names the caller's options type in errors; ready
// checks the topology can run the scenario, after the options.
func (r *run) lose(ctx context.Context, o OutageOptions, opts string, ready func() error, cut func(context.Context, *topology.Cluster) (func(context.Context) error, error)) (OutageResult, error) {
	env := r.env
	var res OutageResult
	d := o.Dispatch
	if err := d.use(r.name, opts+".Dispatch", DispatchOptions{Jobs: 2 * len(env.Topo.Workers), NamePrefix: "outage", Memory: "256Mi", RunFor: 10 * time.Second},
		map[string]string{"Kinds": "it submits batch/Jobs only", "Fails": "its Jobs must succeed to be judged re-dispatched", "StartTimeout": "its waits are bounded by the Checker's Timeout"}); err != nil {
		return res, err
	}
	if err := ready(); err != nil {
		return res, err
	}
	if len(env.Topo.Workers) < 2 {
		return res, r.errorf("needs at least 2 workers to re-dispatch to; the topology has %d", len(env.Topo.Workers))
	}
	wlt := env.Topo.Spec.WorkerLostTimeout()
	if wlt > MaxOutageWorkerLostTimeout {
		return res, r.errorf("%s; the scenario waits for it: give at most %s (topology.Options.Kueue.WorkerLostTimeout)", env.Topo.Facts.Say(topology.FactWorkerLostTimeout, wlt), MaxOutageWorkerLostTimeout)
	}
	if o.RedispatchBound == 0 {
		o.RedispatchBound = DefaultRedispatchBound
	}
	objs, victim, inFlight, err := r.loadOne(ctx, &d, opts+".Dispatch", o.Worker)
	res.Objects = objs
	if err != nil {
		return res, err
	}
	res.Worker = victim.Name
	res.Stopped = time.Now()
	back, err := cut(ctx, victim)
	if err != nil {
		return res, err
	}
	var errs []error
	restart := func() {
		if !res.Restarted.IsZero() {
			return
		}
		res.Restarted = time.Now()
		errs = append(errs, back(context.WithoutCancel(ctx)))
	}
	defer restart() // whatever happens, the worker comes back
	errs = append(errs, r.chk.ClusterInactive(ctx, victim.Name, ""))

	// Every in-flight Job was placed before the stop, so each hold ends by
	// stop + workerLostTimeout and each re-dispatch is due within the bound
	// after that: one deadline for all, not one wait each (a Kueue that
	// never re-dispatches costs that window once, not once per Job).
	deadline := res.Stopped.Add(wlt + o.RedispatchBound + r.chk.Timeout)
	for _, ob := range inFlight {
		d, err := r.redispatched(ctx, ob, victim.Name, deadline)
		errs = append(errs, err)
		res.InFlight = append(res.InFlight, d)
	}
	restart()
	backChk := *r.chk
	backChk.Timeout = KueueReconnectBackoffMax + r.chk.Timeout
	errs = append(errs, backChk.ClusterActive(ctx, victim.Name))
	evs, _ := env.Obs.History(observe.KindMultiKueueCluster, "", victim.Name)
	for _, e := range evs {
		switch {
		case e.Type == observe.ClusterInactive && e.Time.After(res.Stopped) && res.Inactive.IsZero():
			res.Inactive = e.Time
		case e.Type == observe.ClusterActive && e.Time.After(res.Restarted) && res.Active.IsZero():
			res.Active = e.Time
		}
	}
	for _, d := range res.InFlight {
		errs = append(errs, judgeHold(r.name, d, victim.Name, res.Stopped, wlt, o.RedispatchBound))
	}
	errs = append(errs, r.judge(ctx, objs, append(append(r.placementChecks(), r.runChecks()...), r.outcomeCheck())...))
	errs = append(errs, r.chk.QuotaRespected(ctx), r.chk.NoOrphans(ctx))
	res.Placement, res.Unrecorded = r.placements(ctx, objs)
	for _, ob := range objs {
		res.Jobs = append(res.Jobs, jobOf(ob)...)
	}
	return res, errors.Join(errs...)
}

// WorkerOutage runs WorkerOutage and reports its error (skips without a
// Lifecycle when the TB can skip).
func (r *Runner) WorkerOutage(ctx context.Context, o OutageOptions) (OutageResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, WorkerOutage, o)
}

// loadOne submits the batch/Jobs of d (its defaults applied; path names it
// in errors) and picks the worker they run on (want, or the busiest) with
// pickVictim: the load of the scenarios that do something to one worker
// while its Jobs run (WorkerOutage, Disconnect, RotateCredentials).
func (r *run) loadOne(ctx context.Context, d *DispatchOptions, path, want string) ([]client.Object, *topology.Cluster, []client.Object, error) {
	objs, err := r.batchJobs(d, path)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := r.submit(ctx, objs); err != nil {
		return objs, nil, nil, err
	}
	victim, inFlight, err := r.pickVictim(ctx, objs, want)
	return objs, victim, inFlight, err
}

// pickVictim waits until every object is placed and one runs on a worker,
// then returns the worker to stop (want, or the one running the most) and
// the objects placed on it and not finished.
func (r *run) pickVictim(ctx context.Context, objs []client.Object, want string) (*topology.Cluster, []client.Object, error) {
	mgr := r.env.Topo.Manager.Name
	var victim string
	var inFlight []client.Object
	err := poll.Until(ctx, r.chk.Timeout, "every Job placed and one running on a worker", func(ctx context.Context) error {
		running := map[string][]client.Object{}
		onWant := 0 // unfinished objects placed on want
		for _, o := range objs {
			key, err := r.workloadKey(ctx, o)
			if err != nil {
				return err
			}
			wl, _ := r.env.Obs.History(observe.KindWorkload, key.Namespace, key.Name)
			placed, finished := "", false
			for _, e := range wl {
				if e.Cluster != mgr {
					continue
				}
				switch e.Type {
				case observe.ClusterNameSet:
					placed = e.ClusterName()
				case observe.Finished:
					finished = true
				}
			}
			if placed == "" {
				return fmt.Errorf("%s not placed yet", ref(o))
			}
			if finished {
				continue
			}
			if placed == want {
				onWant++
			}
			jobs, _ := r.env.Obs.History(observe.KindJob, o.GetNamespace(), o.GetName())
			if slices.ContainsFunc(jobs, func(e observe.Event) bool { return e.Cluster == placed && e.Type == observe.JobStarted }) {
				running[placed] = append(running[placed], o)
			}
		}
		if want != "" && onWant == 0 {
			// Every Job is placed and none still runs or waits there:
			// placements do not move, so waiting longer cannot help.
			return poll.Stop(fmt.Errorf("every Job is placed and none unfinished on %q, the worker asked for", want))
		}
		victim = want
		if victim == "" {
			for _, w := range r.env.Topo.Spec.WorkerNames {
				if len(running[w]) > len(running[victim]) {
					victim = w
				}
			}
		}
		if len(running[victim]) == 0 {
			return fmt.Errorf("no Job running on %q yet", victim)
		}
		inFlight = running[victim]
		return nil
	})
	if err != nil {
		return nil, nil, r.errorf("%w", err)
	}
	return r.env.Topo.Worker(victim), inFlight, nil
}

// redispatched waits, until deadline, for o's Workload, placed on lost, to
// be placed on another worker, and returns its way there.
func (r *run) redispatched(ctx context.Context, o client.Object, lost string, deadline time.Time) (Redispatch, error) {
	d := Redispatch{Job: ref(o)}
	key, err := r.workloadKey(ctx, o)
	if err != nil {
		return d, err
	}
	mgr := r.env.Topo.Manager.Name
	err = poll.Until(ctx, max(time.Until(deadline), 0), fmt.Sprintf("cluster %q: Workload %s of %s to be placed on a worker other than %q by %s (the stop + workerLostTimeout + the re-dispatch bound + the Checker's timeout)", mgr, key, d.Job, lost, stamp(deadline)), func(context.Context) error {
		d = Redispatch{Job: d.Job}
		evs, _ := r.env.Obs.History(observe.KindWorkload, key.Namespace, key.Name)
		on := ""
		for _, e := range evs {
			if e.Cluster != mgr {
				continue
			}
			switch e.Type {
			case observe.ClusterNameSet:
				v := e.ClusterName()
				switch {
				case v == lost:
					d.Placed = e.Time
				case v == "" && on == lost && d.Released.IsZero():
					d.Released = e.Time
				case v != "" && v != lost && !d.Placed.IsZero():
					d.Next = v
				}
				on = v
			case observe.Evicted:
				if on == lost && d.Released.IsZero() {
					d.Released = e.Time
				}
			}
		}
		if d.Next == "" {
			return fmt.Errorf("placed on %q at %s, released at %s, not placed again", lost, stamp(d.Placed), stamp(d.Released))
		}
		return nil
	})
	return d, err
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000")
}

// judgeHold checks one in-flight Job's hold on the lost worker.
func judgeHold(scenario string, d Redispatch, lost string, stopped time.Time, wlt, bound time.Duration) error {
	if d.Placed.IsZero() || d.Released.IsZero() {
		return fmt.Errorf("scenario %s: %s: no placement on %q and release from it recorded (placed %s, released %s)", scenario, d.Job, lost, stamp(d.Placed), stamp(d.Released))
	}
	var errs []error
	holdEnd := d.Placed.Add(wlt)
	if d.Released.Before(holdEnd.Add(-HoldTimestampPrecision - assert.DefaultSkew)) {
		errs = append(errs, fmt.Errorf("scenario %s: %s was released from the lost worker %q at %s, %s after its placement: before workerLostTimeout (%s)",
			scenario, d.Job, lost, stamp(d.Released), d.Released.Sub(d.Placed).Round(time.Millisecond), wlt))
	}
	latest := holdEnd
	if stopped.After(latest) {
		latest = stopped
	}
	if d.Released.After(latest.Add(bound)) {
		errs = append(errs, fmt.Errorf("scenario %s: %s was released from the lost worker %q at %s, %s after the hold ended at %s (bound %s)",
			scenario, d.Job, lost, stamp(d.Released), d.Released.Sub(latest).Round(time.Millisecond), stamp(latest), bound))
	}
	if d.Next == lost || d.Next == "" {
		errs = append(errs, fmt.Errorf("scenario %s: %s was not placed on another worker after leaving %q (next: %q)", scenario, d.Job, lost, d.Next))
	}
	return errors.Join(errs...)
}
