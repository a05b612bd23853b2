package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
)

// RestartOptions shape ManagerRestart.
type RestartOptions struct {
	// Dispatch is the load submitted before the restart, batch/Jobs only
	// (Kinds, Fails and StartTimeout must be unset). Defaults: Jobs twice as many as the
	// manager or the workers fit at once, so that some wait on the manager;
	// NamePrefix "restart"; CPU "1", Memory "256Mi"; RunFor 3s.
	Dispatch DispatchOptions
}

// RestartResult is what ManagerRestart saw.
type RestartResult struct {
	DispatchResult
	// Stopped and Started are when the manager's Kueue was stopped and
	// started again.
	Stopped, Started time.Time
	// PlacedAtStop and PendingAtStop count the Jobs placed on a worker and
	// not yet placed when Kueue stopped; FinishedWhileDown those whose
	// remote Job finished while it was down.
	PlacedAtStop, PendingAtStop, FinishedWhileDown int
	// NotResumed lists the Jobs that were waiting for dispatch when Kueue
	// stopped and that the restarted Kueue neither nominated, placed nor
	// finished within the Checker's Timeout (each also an error wrapping
	// ErrNotResumed). The per-Job checks skip them: they would only time
	// out, one by one, on the same cause.
	NotResumed []string
}

// ErrNotResumed is wrapped by ManagerRestart's error for each Job the
// restarted Kueue did not pick up again (RestartResult.NotResumed), and by
// Failover's for each Job the manager's new leader did not
// (FailoverResult.NotResumed). Kueue
// v0.18 and v0.19 do that (measured on v0.18.4 and v0.19.2; v0.17.1 resumes
// every Job): from v0.18 MultiKueue's remoteClientsForAC returns the
// connected workers and no error when none is connected yet (v0.17 returned
// ErrNoActiveClusters, and the reconcile was retried), so a Workload that
// the new process reconciles before its clients to the workers connect gets
// AllAtOnce's nomination of no worker, no error and no requeue, and nothing
// writes it again.
var ErrNotResumed = errors.New("not resumed by the Kueue that came up")

// ManagerRestart is the manager-restart scenario. It needs process control
// of the manager (Cluster.Lifecycle; NeedsLifecycleError without it). It
// submits more Jobs than run at once, waits until some are placed on
// workers (as many as there are workers) and running while others still
// wait, stops the manager's Kueue
// (controllers and webhooks) mid-dispatch, waits until a remote Job finished
// on its worker while the manager's Kueue was down, starts it again, and
// checks for every Job ExactlyOnceAdmitted, NominationCleared,
// LosersCleaned, Finished, StatusSynced and the outcome; QuotaRespected
// over the run and NoOrphans. The error joins every failed check.
func ManagerRestart(ctx context.Context, env *Env, o RestartOptions) (RestartResult, error) {
	r, err := begin(env, "ManagerRestart")
	if err != nil {
		return RestartResult{}, err
	}
	var res RestartResult
	d := o.Dispatch
	if err := d.use(r.name, "RestartOptions.Dispatch", DispatchOptions{NamePrefix: "restart", CPU: "1", Memory: "256Mi", RunFor: 3 * time.Second},
		map[string]string{"Kinds": "it submits batch/Jobs only", "Fails": "its Jobs must succeed to be judged resumed", "StartTimeout": "its waits are bounded by the Checker's Timeout"}); err != nil {
		return res, err
	}
	lc, err := r.lifecycle(env.Topo.Manager)
	if err != nil {
		return res, err
	}
	if d.Jobs == 0 {
		m, w, err := r.capacity(ctx, "RestartOptions.Dispatch", d.CPU, d.Memory)
		if err != nil {
			return res, err
		}
		d.Jobs = 2 * max(m, w, 1)
	}
	objs, err := r.batchJobs(&d, "RestartOptions.Dispatch")
	if err != nil {
		return res, err
	}
	res.Objects = objs
	for _, ob := range objs {
		res.Jobs = append(res.Jobs, jobOf(ob)...)
	}
	if err := r.submit(ctx, objs); err != nil {
		return res, err
	}
	mgr := env.Topo.Manager.Name
	// Mid-dispatch: as many Jobs placed as there are workers, one running,
	// another not placed yet.
	err = poll.Until(ctx, r.chk.Timeout, "Jobs placed and running on workers while another waits on the manager", func(ctx context.Context) error {
		res.PlacedAtStop, res.PendingAtStop = 0, 0
		running := false
		for _, ob := range objs {
			key, err := r.workloadKey(ctx, ob)
			if err != nil {
				return err
			}
			wl, _ := env.Obs.History(observe.KindWorkload, key.Namespace, key.Name)
			placed := false
			for _, e := range wl {
				if e.Cluster == mgr && e.Type == observe.ClusterNameSet {
					placed = e.ClusterName() != ""
				}
			}
			if !placed {
				res.PendingAtStop++
				continue
			}
			res.PlacedAtStop++
			jobs, _ := env.Obs.History(observe.KindJob, ob.GetNamespace(), ob.GetName())
			for _, e := range jobs {
				if e.Cluster != mgr && e.Type == observe.JobStarted {
					running = true
				}
			}
		}
		if !running || res.PendingAtStop == 0 || res.PlacedAtStop < len(env.Topo.Workers) {
			return fmt.Errorf("%d placed (one running: %t), %d not placed", res.PlacedAtStop, running, res.PendingAtStop)
		}
		return nil
	})
	if err != nil {
		return res, r.errorf("%w", err)
	}
	res.Stopped = time.Now()
	if err := lc.StopKueue(ctx); err != nil {
		return res, r.errorf("cluster %q: stop Kueue: %w", mgr, err)
	}
	var errs []error
	err = poll.Until(ctx, d.RunFor+r.chk.Timeout, "a remote Job to finish while the manager's Kueue is down", func(context.Context) error {
		res.FinishedWhileDown = 0
		for _, ob := range objs {
			jobs, _ := env.Obs.History(observe.KindJob, ob.GetNamespace(), ob.GetName())
			for _, e := range jobs {
				if e.Cluster != mgr && (e.Type == observe.JobSucceeded || e.Type == observe.JobFailed) && e.Time.After(res.Stopped) {
					res.FinishedWhileDown++
				}
			}
		}
		if res.FinishedWhileDown == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	errs = append(errs, err)
	res.Started = time.Now()
	if err := lc.StartKueue(ctx); err != nil {
		return res, errors.Join(append(errs, r.errorf("cluster %q: start Kueue again: %w", mgr, err))...)
	}
	resumed, notResumed := r.resumed(ctx, objs, res.Stopped, res.Started, "the restarted Kueue")
	for _, e := range notResumed {
		res.NotResumed = append(res.NotResumed, e.job)
		errs = append(errs, e.err)
	}
	errs = append(errs, r.judge(ctx, resumed, append(append(r.placementChecks(), r.runChecks()...), r.outcomeCheck())...))
	errs = append(errs, r.chk.QuotaRespected(ctx))
	if len(notResumed) == 0 {
		errs = append(errs, r.chk.NoOrphans(ctx)) // else their copies may stay; that is the same cause
	}
	res.Placement, res.Unrecorded = r.placements(ctx, objs)
	return res, errors.Join(errs...)
}

// ManagerRestart runs ManagerRestart and reports its error (skips without a
// Lifecycle when the TB can skip).
func (r *Runner) ManagerRestart(ctx context.Context, o RestartOptions) (RestartResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, ManagerRestart, o)
}

type notResumed struct {
	job string
	err error
}

// resumed waits (up to the Checker's Timeout) until the manager's Kueue
// that came up at started (who: "the restarted Kueue", "the new leader
// kueue-1_…") nominated, placed or finished each Workload that was waiting
// for dispatch at stopped (no clusterName, not finished), and splits objs
// into those resumed (or placed before the stop) and those it never picked
// up again.
func (r *run) resumed(ctx context.Context, objs []client.Object, stopped, started time.Time, who string) ([]client.Object, []notResumed) {
	mgr := r.env.Topo.Manager.Name
	type waiting struct {
		obj client.Object
		key client.ObjectKey
	}
	var wait []waiting
	var out []client.Object
	for _, ob := range objs {
		key, err := r.workloadKey(ctx, ob)
		if err != nil {
			out = append(out, ob) // the checks say what is wrong
			continue
		}
		evs, _ := r.env.Obs.History(observe.KindWorkload, key.Namespace, key.Name)
		// later: its Workload was created after started and its job was
		// submitted after started too, so it was not waiting for the
		// Kueue that came up (the per-Job checks judge it). A job
		// submitted while no Kueue ran waits for it as one in flight at
		// the stop does, whoever creates its Workload (seen in CI: the
		// new leader created such a Workload 3 s after taking over and
		// never dispatched it, as it never did 8 waiting at the kill).
		placed, later := false, submittedAfter(r.env.Obs, ob, mgr, started)
		for _, e := range evs {
			if e.Cluster != mgr {
				continue
			}
			if e.Type == observe.Created && !e.Time.After(started) {
				later = false
			}
			if !e.Time.After(stopped) && (e.ClusterName() != "" || e.Type == observe.Finished) {
				placed = true
			}
		}
		if placed || later {
			out = append(out, ob)
		} else {
			wait = append(wait, waiting{ob, key})
		}
	}
	picked := func(w waiting) bool {
		evs, _ := r.env.Obs.History(observe.KindWorkload, w.key.Namespace, w.key.Name)
		for _, e := range evs {
			if e.Cluster == mgr && e.Time.After(started) &&
				((e.Type == observe.Nominated && len(e.Values) > 0) || e.ClusterName() != "" || e.Type == observe.Finished) {
				return true
			}
		}
		return false
	}
	_ = poll.Until(ctx, r.chk.Timeout, fmt.Sprintf("cluster %q: %s to nominate, place or finish the %d Workloads waiting at the stop", mgr, who, len(wait)), func(context.Context) error {
		n := 0
		for _, w := range wait {
			if !picked(w) {
				n++
			}
		}
		if n > 0 {
			return fmt.Errorf("%d not picked up yet", n)
		}
		return nil
	})
	var missed []notResumed
	for _, w := range wait {
		if picked(w) {
			out = append(out, w.obj)
			continue
		}
		missed = append(missed, notResumed{job: ref(w.obj), err: r.errorf("cluster %q: Workload %s of %s was waiting for dispatch when Kueue stopped, or was submitted before the next one came up (no clusterName), and %s neither nominated, placed nor finished it within %s: %w",
			mgr, w.key, ref(w.obj), who, r.chk.Timeout, ErrNotResumed)})
	}
	return out, missed
}

// submittedAfter reports whether the manager's job object ob was created
// after t, by the Observer's history; true when its creation was not seen.
func submittedAfter(obs *observe.Observer, ob client.Object, mgr string, t time.Time) bool {
	kind, ok := observe.JobKindOf(ob)
	if !ok {
		return true
	}
	evs, _ := obs.History(kind, ob.GetNamespace(), ob.GetName())
	for _, e := range evs {
		if e.Cluster == mgr && e.Type == observe.Created {
			return e.Time.After(t)
		}
	}
	return true
}
