package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// HoldCheck is the AdmissionCheck LoserCleanup adds to the workers'
// ClusterQueues with HoldAdmission, and HoldController its controllerName.
const (
	HoldCheck      = "mktk-hold"
	HoldController = "testkit.multikueue.x-k8s.io/hold"
)

// LoserCleanupOptions shape LoserCleanup.
type LoserCleanupOptions struct {
	// Dispatch shapes the jobs (Jobs of each kind, default 1; every field as
	// for Dispatch).
	Dispatch DispatchOptions
	// HoldAdmission, when positive, separates a copy's quota reservation on
	// its worker from its admission, so that the gate's effect shows: for
	// the run, every worker's ClusterQueue gets the AdmissionCheck HoldCheck,
	// whose controller the scenario plays: a copy that reserved quota stays
	// unadmitted for HoldAdmission (from when the scenario saw the
	// reservation). The checks are removed afterwards. A few seconds is
	// plenty: the assertions allow 250 ms of skew between clusters.
	HoldAdmission time.Duration
}

// LoserCleanupResult is what LoserCleanup saw.
type LoserCleanupResult struct {
	DispatchResult
	// WaitForWorkloadAdmitted is the MultiKueueWaitForWorkloadAdmitted gate
	// as the topology runs it (Kueue's default when not set): the gate
	// LosersCleaned judged with.
	WaitForWorkloadAdmitted bool
	// Losers counts the losing copies deleted before the first placement;
	// BeforeAdmitted those of them deleted before the winner's copy was
	// Admitted, BeforeReserved before it reserved quota.
	Losers, BeforeAdmitted, BeforeReserved int
}

// LoserCleanup is the loser-cleanup scenario for the
// MultiKueueWaitForWorkloadAdmitted feature gate, with the AllAtOnce
// dispatcher on two or more workers (so that every workload has losing
// copies). It runs Dispatch, whose LosersCleaned judges with the gate as
// the topology runs it: on, no losing copy may go before the winner's copy
// is Admitted; off, none before it reserved quota. It counts, from the
// recorded history, the losing copies deleted before the winner was
// Admitted and before it reserved quota. With HoldAdmission the two moments
// differ, and the gate must show: on, none deleted before Admitted; off, at
// least one. The error joins every failed check.
func LoserCleanup(ctx context.Context, env *Env, o LoserCleanupOptions) (LoserCleanupResult, error) {
	r, err := begin(env, "LoserCleanup")
	if err != nil {
		return LoserCleanupResult{}, err
	}
	res := LoserCleanupResult{WaitForWorkloadAdmitted: true}
	if v, ok := env.Topo.Spec.Kueue.FeatureGates[assert.GateWaitForWorkloadAdmitted]; ok {
		res.WaitForWorkloadAdmitted = v
	}
	if err := r.needDispatcher(topology.DispatcherAllAtOnce); err != nil {
		return res, err
	}
	if len(env.Topo.Workers) < 2 {
		return res, r.errorf("needs at least 2 workers for losing copies; the topology has %d", len(env.Topo.Workers))
	}
	d := o.Dispatch
	if d.NamePrefix == "" {
		d.NamePrefix = "losers"
	}
	objs, err := r.dispatchObjects(&d, "LoserCleanupOptions.Dispatch")
	if err != nil {
		return res, err
	}
	stopHold := func() error { return nil }
	if o.HoldAdmission > 0 {
		undo, err := r.installHold(ctx)
		if err != nil {
			return res, errors.Join(err, undo(context.WithoutCancel(ctx)))
		}
		h := &holder{r: r, hold: o.HoldAdmission, since: map[string]time.Time{}}
		hctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); h.run(hctx) }()
		stopHold = func() error {
			stop()
			<-done
			return errors.Join(h.err(), undo(context.WithoutCancel(ctx)))
		}
	}
	res.DispatchResult, err = r.dispatch(ctx, objs, d)
	errs := []error{err, stopHold()}
	for _, ob := range objs {
		errs = append(errs, r.countLosers(ctx, ob, &res))
	}
	if o.HoldAdmission > 0 {
		switch {
		case res.WaitForWorkloadAdmitted && res.BeforeAdmitted > 0:
			errs = append(errs, r.errorf("%s is on, yet %d of %d losing copies were deleted before the winner was Admitted", assert.GateWaitForWorkloadAdmitted, res.BeforeAdmitted, res.Losers))
		case !res.WaitForWorkloadAdmitted && res.BeforeAdmitted == 0:
			errs = append(errs, r.errorf("%s is off and admission was held for %s, yet none of %d losing copies was deleted before the winner was Admitted", assert.GateWaitForWorkloadAdmitted, o.HoldAdmission, res.Losers))
		}
	}
	return res, errors.Join(errs...)
}

// LoserCleanup runs LoserCleanup and reports its error.
func (r *Runner) LoserCleanup(ctx context.Context, o LoserCleanupOptions) (LoserCleanupResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, LoserCleanup, o)
}

// countLosers adds o's losing copies of its first cycle to res.
func (r *run) countLosers(ctx context.Context, o client.Object, res *LoserCleanupResult) error {
	key, err := r.workloadKey(ctx, o)
	if err != nil {
		return err
	}
	evs, _ := r.env.Obs.History(observe.KindWorkload, key.Namespace, key.Name)
	mgr := r.env.Topo.Manager.Name
	winner := ""
	var placed time.Time
	for _, e := range evs {
		if e.Cluster == mgr && e.ClusterName() != "" {
			winner, placed = e.Values[0], e.Time
			break
		}
	}
	if winner == "" {
		return nil // ExactlyOnceAdmitted reports it
	}
	var admitted, reserved time.Time
	for _, e := range evs {
		if e.Cluster == winner && e.Type == observe.Admitted && admitted.IsZero() {
			admitted = e.Time
		}
		if e.Cluster == winner && e.Type == observe.QuotaReserved && reserved.IsZero() {
			reserved = e.Time
		}
	}
	for _, e := range evs {
		if e.Cluster == mgr || e.Cluster == winner || e.Type != observe.Deleted || e.Time.After(placed.Add(assert.DefaultSkew)) {
			continue
		}
		res.Losers++
		if admitted.IsZero() || e.Time.Before(admitted) {
			res.BeforeAdmitted++
		}
		if reserved.IsZero() || e.Time.Before(reserved) {
			res.BeforeReserved++
		}
	}
	return nil
}

// installHold adds HoldCheck to every worker's ClusterQueue and returns
// what removes it again.
func (r *run) installHold(ctx context.Context) (func(context.Context) error, error) {
	cqName := r.env.Topo.Spec.Queues.ClusterQueue
	var undos []func(context.Context) error
	undo := func(ctx context.Context) error {
		var errs []error
		for i := len(undos) - 1; i >= 0; i-- {
			errs = append(errs, undos[i](ctx))
		}
		return errors.Join(errs...)
	}
	for _, w := range r.env.Topo.Workers {
		ac := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: HoldCheck}, Spec: kueue.AdmissionCheckSpec{ControllerName: HoldController}}
		if err := w.Client.Create(ctx, ac); err != nil {
			return undo, r.errorf("cluster %q: create AdmissionCheck %s: %w", w.Name, HoldCheck, err)
		}
		undos = append(undos, func(ctx context.Context) error {
			if err := client.IgnoreNotFound(w.Client.Delete(ctx, ac)); err != nil {
				return r.errorf("cluster %q: delete AdmissionCheck %s: %w", w.Name, HoldCheck, err)
			}
			return nil
		})
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // Kueue adds its finalizer meanwhile
			cur := &kueue.AdmissionCheck{}
			if err := w.Client.Get(ctx, client.ObjectKeyFromObject(ac), cur); err != nil {
				return err
			}
			apimeta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: kueue.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active", Message: "played by the scenario"})
			return w.Client.Status().Update(ctx, cur)
		})
		if err != nil {
			return undo, r.errorf("cluster %q: AdmissionCheck %s: set Active: %w", w.Name, HoldCheck, err)
		}
		if err := r.setWorkerChecks(ctx, w, func(checks []kueue.AdmissionCheckStrategyRule) []kueue.AdmissionCheckStrategyRule {
			return append(checks, kueue.AdmissionCheckStrategyRule{Name: HoldCheck})
		}); err != nil {
			return undo, err
		}
		undos = append(undos, func(ctx context.Context) error {
			return r.setWorkerChecks(ctx, w, func(checks []kueue.AdmissionCheckStrategyRule) []kueue.AdmissionCheckStrategyRule {
				return slices.DeleteFunc(checks, func(c kueue.AdmissionCheckStrategyRule) bool { return c.Name == HoldCheck })
			})
		})
		err = poll.Until(ctx, r.chk.Timeout, fmt.Sprintf("cluster %q: ClusterQueue %s Active with AdmissionCheck %s", w.Name, cqName, HoldCheck), func(ctx context.Context) error {
			cq := &kueue.ClusterQueue{}
			if err := w.Client.Get(ctx, client.ObjectKey{Name: cqName}, cq); err != nil {
				return err
			}
			if !apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive) {
				return errors.New("not Active")
			}
			return nil
		})
		if err != nil {
			return undo, r.errorf("%w", err)
		}
	}
	return undo, nil
}

// setWorkerChecks rewrites the admission checks of w's ClusterQueue.
func (r *run) setWorkerChecks(ctx context.Context, w *topology.Cluster, edit func([]kueue.AdmissionCheckStrategyRule) []kueue.AdmissionCheckStrategyRule) error {
	name := r.env.Topo.Spec.Queues.ClusterQueue
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cq := &kueue.ClusterQueue{}
		if err := w.Client.Get(ctx, client.ObjectKey{Name: name}, cq); err != nil {
			return err
		}
		var checks []kueue.AdmissionCheckStrategyRule
		if cq.Spec.AdmissionChecksStrategy != nil {
			checks = cq.Spec.AdmissionChecksStrategy.AdmissionChecks
		}
		checks = edit(slices.Clone(checks))
		if len(checks) == 0 {
			cq.Spec.AdmissionChecksStrategy = nil
		} else {
			cq.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{AdmissionChecks: checks}
		}
		return w.Client.Update(ctx, cq)
	})
	if err != nil {
		return r.errorf("cluster %q: ClusterQueue %s: set admission checks: %w", w.Name, name, err)
	}
	return nil
}

// holder plays HoldCheck's controller on the workers.
type holder struct {
	r    *run
	hold time.Duration

	mu    sync.Mutex
	since map[string]time.Time // first seen pending, per copy ("cluster/namespace/name")
	errs  []error
}

func (h *holder) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		for _, w := range h.r.env.Topo.Workers {
			h.once(ctx, w)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *holder) once(ctx context.Context, w *topology.Cluster) {
	var wls kueue.WorkloadList
	if err := h.r.env.Obs.Reader(w.Name).List(ctx, &wls, client.HasLabels{observe.LabelOrigin}); err != nil {
		return
	}
	for i := range wls.Items {
		wl := &wls.Items[i]
		st := findAdmissionCheck(wl.Status.AdmissionChecks, HoldCheck)
		if st == nil || st.State != kueue.CheckStatePending || !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
			continue
		}
		k := w.Name + "/" + wl.Namespace + "/" + wl.Name
		h.mu.Lock()
		first, ok := h.since[k]
		if !ok {
			first = time.Now()
			h.since[k] = first
		}
		h.mu.Unlock()
		if time.Since(first) < h.hold {
			continue
		}
		err := applyAdmissionStatus(ctx, w.Client, wl, func(wl *kueue.Workload) {
			setAdmissionCheckState(&wl.Status.AdmissionChecks, kueue.AdmissionCheckState{
				Name: HoldCheck, State: kueue.CheckStateReady, Message: "released by the scenario",
			})
		})
		if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) { // both retried at the next tick
			h.mu.Lock()
			if len(h.errs) < 5 {
				h.errs = append(h.errs, h.r.errorf("hold: cluster %q: release Workload %s/%s: %w", w.Name, wl.Namespace, wl.Name, err))
			}
			h.mu.Unlock()
		}
	}
}

func (h *holder) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return errors.Join(h.errs...)
}
