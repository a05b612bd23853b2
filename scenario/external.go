package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// ExternalOptions shape External.
type ExternalOptions struct {
	// Dispatch shapes the jobs (Jobs of each kind, default 1; every field as
	// for Dispatch).
	Dispatch DispatchOptions
	// Choose picks the workers to nominate for a pending Workload among the
	// Active workers (sorted by name). Default: one worker per Workload, in
	// turn, so that every placement is the nominator's choice alone.
	Choose func(wl *kueue.Workload, active []string) []string
	// Write is how the nominator writes the nominations; default
	// NominateAsKueue.
	Write NominationWrite
}

// NominationWrite is how the External scenario's nominator writes
// status.nominatedClusterNames.
type NominationWrite string

const (
	// NominateAsKueue writes as Kueue's own Incremental dispatcher does,
	// as Kueue's workload.PatchAdmissionStatus does (applyAdmissionStatus): a server-side apply of the
	// admission status as field manager kueue-admission. MultiKueue's later
	// apply of the placement (clusterName set, nominations omitted) then
	// clears the nominations.
	NominateAsKueue NominationWrite = "kueue-apply"
	// NominateWithMergePatch writes a JSON merge patch of the status, as a
	// controller written without Kueue's libraries would. The nominator then
	// owns the field, and Kueue v0.17 (v0.17.0, v0.17.1; fixed by v0.18.4) cannot record the placement: its
	// apply that sets clusterName leaves the nominations in place and the API
	// server rejects it (422, "clusterName and nominatedClusterNames are
	// mutually exclusive"), again and again, while the remote job runs and
	// the manager Workload finishes without a clusterName. Kept to show that
	// (docs/findings.md); the scenario fails with it.
	NominateWithMergePatch NominationWrite = "merge-patch"
)

// ExternalResult is what External saw.
type ExternalResult struct {
	DispatchResult
	// Nominated maps each Workload ("default/job-a-1b2c3") to the
	// nominations the scenario's nominator wrote, in order.
	Nominated map[string][][]string
	// Conflicts counts the nominations the API server refused because the
	// nominator's cached Workload was stale (Kueue had written it since);
	// the nominator wrote them again from a fresh read, as a controller
	// requeues.
	Conflicts int
}

// External is the External-dispatcher scenario, on a topology whose manager
// runs a dispatcher name Kueue does not implement (Options.Kueue.Dispatcher
// set to, say, "example.com/my-dispatcher"): MultiKueue then waits for an
// outside controller to write status.nominatedClusterNames. The scenario
// runs that controller, a nominator that, while the jobs run, writes each
// pending Workload's nominations (quota reserved on the manager, the
// MultiKueue admission check Pending, no clusterName and no nominations)
// as Kueue's Incremental dispatcher writes them (ExternalOptions.Write),
// choosing with Choose. It runs Dispatch
// and checks for each Workload that every nomination recorded on the
// manager is one the nominator wrote (Kueue nominated nothing itself) and
// that each placement is on a worker the nominator had nominated. The error
// joins every failed check.
func External(ctx context.Context, env *Env, o ExternalOptions) (ExternalResult, error) {
	r, err := begin(env, "External")
	if err != nil {
		return ExternalResult{}, err
	}
	switch d := env.Topo.Spec.Kueue.Dispatcher; d {
	case topology.DispatcherAllAtOnce, topology.DispatcherIncremental:
		return ExternalResult{}, r.errorf("the manager's MultiKueue dispatcher is %q, which Kueue implements; set topology.Options.Kueue.Dispatcher to another name for an external one", d)
	}
	d := o.Dispatch
	objs, err := r.dispatchObjects(&d, "ExternalOptions.Dispatch")
	if err != nil {
		return ExternalResult{}, err
	}
	switch o.Write {
	case "":
		o.Write = NominateAsKueue
	case NominateAsKueue, NominateWithMergePatch:
	default:
		return ExternalResult{}, r.errorf("ExternalOptions.Write: %q is neither %q nor %q", o.Write, NominateAsKueue, NominateWithMergePatch)
	}
	n := &nominator{r: r, choose: o.Choose, write: o.Write, wrote: map[client.ObjectKey][][]string{}, sent: map[client.ObjectKey]time.Time{}}
	if n.choose == nil {
		n.choose = n.inTurn
	}
	// The nominator chooses among the workers the Observer has seen Active:
	// wait until it has seen every worker so (a topology just started may
	// be a moment behind: in-turn nominations then skipped worker-3, caught
	// by a fresh-clone run), then go on with those it has.
	_ = poll.Until(ctx, r.chk.Timeout, fmt.Sprintf("the Observer to record all %d workers Active", len(env.Topo.Workers)), func(context.Context) error {
		if got := r.activeWorkers(); len(got) < len(env.Topo.Workers) {
			return fmt.Errorf("Active so far: %v", got)
		}
		return nil
	})
	nctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); n.run(nctx) }()
	res := ExternalResult{Nominated: map[string][][]string{}}
	res.DispatchResult, err = r.dispatch(ctx, objs, d)
	stop()
	<-done
	errs := []error{err, n.err()}
	n.mu.Lock()
	for k, v := range n.wrote {
		res.Nominated[k.String()] = v
	}
	res.Conflicts = n.conflicts
	n.mu.Unlock()
	for _, ob := range objs {
		errs = append(errs, r.nominatedByUs(ctx, ob, n))
	}
	return res, errors.Join(errs...)
}

// External runs External and reports its error.
func (r *Runner) External(ctx context.Context, o ExternalOptions) (ExternalResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, External, o)
}

// nominator is a minimal external MultiKueue dispatcher.
type nominator struct {
	r      *run
	choose func(*kueue.Workload, []string) []string
	write  NominationWrite

	mu    sync.Mutex
	turn  int
	wrote map[client.ObjectKey][][]string
	// sent is when the last nomination of a Workload was sent, until the
	// Observer records it (the cache may still show the Workload pending).
	sent      map[client.ObjectKey]time.Time
	conflicts int
	errs      []error
}

func (n *nominator) inTurn(_ *kueue.Workload, active []string) []string {
	w := active[n.turn%len(active)]
	n.turn++
	return []string{w}
}

// run nominates every 100ms until ctx ends.
func (n *nominator) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		n.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *nominator) once(ctx context.Context) {
	r := n.r
	mgr := r.env.Topo.Manager
	for _, ns := range r.env.Topo.Spec.Queues.Namespaces {
		var wls kueue.WorkloadList
		if err := r.env.Obs.Reader(mgr.Name).List(ctx, &wls, client.InNamespace(ns)); err != nil {
			continue // the cache is not ready or ctx ended; try again
		}
		for i := range wls.Items {
			wl := &wls.Items[i]
			k := client.ObjectKeyFromObject(wl)
			if !n.pending(wl) || n.unseen(k) {
				continue
			}
			active := r.activeWorkers()
			if len(active) == 0 {
				continue
			}
			n.mu.Lock()
			pick := slices.Clone(n.choose(wl, active))
			n.mu.Unlock()
			if len(pick) == 0 {
				continue
			}
			sent := time.Now()
			if err := n.nominate(ctx, wl, pick); err != nil {
				if apierrors.IsConflict(err) {
					// The cached Workload was stale (Kueue wrote it
					// meanwhile): nominate again from the next read, as a
					// controller requeues.
					n.mu.Lock()
					n.conflicts++
					n.mu.Unlock()
					continue
				}
				if ctx.Err() == nil {
					n.mu.Lock()
					n.errs = append(n.errs, r.errorf("nominator: cluster %q: patch Workload %s/%s status.nominatedClusterNames=[%s]: %w",
						mgr.Name, wl.Namespace, wl.Name, strings.Join(pick, ","), err))
					n.mu.Unlock()
				}
				continue
			}
			n.mu.Lock()
			n.wrote[k] = append(n.wrote[k], pick)
			n.sent[k] = sent
			n.mu.Unlock()
		}
	}
}

// nominate writes pick into wl's status.nominatedClusterNames.
func (n *nominator) nominate(ctx context.Context, wl *kueue.Workload, pick []string) error {
	c := n.r.env.Topo.Manager.Client
	if n.write == NominateWithMergePatch {
		orig := wl.DeepCopy()
		wl.Status.NominatedClusterNames = pick
		return c.Status().Patch(ctx, wl, client.MergeFrom(orig))
	}
	return applyAdmissionStatus(ctx, c, wl, func(wl *kueue.Workload) {
		wl.Status.NominatedClusterNames = pick
	})
}

// unseen reports whether the last nomination sent for k is not yet in the
// Observer's record of the manager.
func (n *nominator) unseen(k client.ObjectKey) bool {
	n.mu.Lock()
	sent, ok := n.sent[k]
	n.mu.Unlock()
	if !ok {
		return false
	}
	evs, _ := n.r.env.Obs.History(observe.KindWorkload, k.Namespace, k.Name)
	for _, e := range evs {
		if e.Cluster == n.r.env.Topo.Manager.Name && e.Type == observe.Nominated && len(e.Values) > 0 && !e.Time.Before(sent) {
			n.mu.Lock()
			delete(n.sent, k)
			n.mu.Unlock()
			return false
		}
	}
	return true
}

// pending: quota reserved on the manager, the MultiKueue check Pending, not
// placed, not nominated, not finished.
func (n *nominator) pending(wl *kueue.Workload) bool {
	if wl.Status.ClusterName != nil || len(wl.Status.NominatedClusterNames) > 0 ||
		!apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) ||
		apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		return false
	}
	for _, ac := range wl.Status.AdmissionChecks {
		if string(ac.Name) == n.r.env.Topo.Spec.Queues.AdmissionCheck {
			return ac.State == kueue.CheckStatePending
		}
	}
	return false
}

// err returns the nominator's write errors, at most 5 of them.
func (n *nominator) err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.errs) > 5 {
		return errors.Join(append(slices.Clone(n.errs[:5]), n.r.errorf("nominator: %d more write errors", len(n.errs)-5))...)
	}
	return errors.Join(n.errs...)
}

// nominatedByUs checks that every nomination of o's Workload recorded on
// the manager is one the nominator wrote, and every placement is on a
// worker it nominated.
func (r *run) nominatedByUs(ctx context.Context, o client.Object, n *nominator) error {
	key, err := r.workloadKey(ctx, o)
	if err != nil {
		return err
	}
	n.mu.Lock()
	wrote := slices.Clone(n.wrote[key])
	n.mu.Unlock()
	ours := func(v []string) bool {
		return slices.ContainsFunc(wrote, func(w []string) bool { return slices.Equal(sorted(w), sorted(v)) })
	}
	evs, _ := r.env.Obs.History(observe.KindWorkload, key.Namespace, key.Name)
	mgr := r.env.Topo.Manager.Name
	var errs []error
	var last []string
	for _, e := range evs {
		if e.Cluster != mgr {
			continue
		}
		switch {
		case e.Type == observe.Nominated && len(e.Values) > 0:
			last = e.Values
			if !ours(e.Values) {
				errs = append(errs, r.errorf("cluster %q: Workload %s of %s was nominated to [%s] at %s, which the nominator did not write (it wrote %v)",
					mgr, key, ref(o), strings.Join(e.Values, ","), e.Time.Format("15:04:05.000"), wrote))
			}
		case e.ClusterName() != "":
			if !slices.Contains(last, e.Values[0]) {
				errs = append(errs, r.errorf("cluster %q: Workload %s of %s was placed on %q at %s, not nominated by the nominator (last nomination [%s])",
					mgr, key, ref(o), e.Values[0], e.Time.Format("15:04:05.000"), strings.Join(last, ",")))
			}
		}
	}
	if len(wrote) == 0 {
		errs = append(errs, r.errorf("cluster %q: the nominator never nominated Workload %s of %s", mgr, key, ref(o)))
	}
	return errors.Join(errs...)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
