package assert

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// NoOrphansSettle is how long NoOrphans waits for ordinary cleanup when
// MultiKueue's garbage collector is disabled.
const NoOrphansSettle = 15 * time.Second

// NoOrphansGrace is how long NoOrphans waits for remote copies to go: twice
// the configured gcInterval plus NoOrphansSettle, or NoOrphansSettle alone
// when garbage collection is disabled (gcInterval 0).
func (c *Checker) NoOrphansGrace() time.Duration {
	gc := c.Topo.Spec.GCInterval()
	if gc <= 0 {
		return NoOrphansSettle
	}
	return 2*gc + NoOrphansSettle
}

// NoOrphans checks that no worker keeps a Workload or job object that
// MultiKueue created (labelled kueue.x-k8s.io/multikueue-origin; a worker's
// own objects, prebuilt-workload-name or not, are not its business) without
// a live manager counterpart:
// the manager object of the same namespace and name must exist and not be
// finished. It waits up to NoOrphansGrace for cleanup, then names each
// orphan, its cluster and its age.
//
// Reads come from the Observer's caches, once they hold every copy the
// workers' API servers list at the call (one metadata list per kind per
// worker: a copy made a moment before is not missed); the requests do not
// grow with the number of workloads. It checks Workloads and the job kinds the
// Observer watches (batch/Job; JobSet, RayJob, the Kubeflow training jobs, the
// MPIJob, the TrainJob, the AppWrapper, the StatefulSet, the
// LeaderWorkerSet and the pods Kueue manages when their integration is on:
// observe.JobKindsFor). Once none
// is left, it checks the pods, with one list per worker
// from its API server: a pod whose Job was MultiKueue's copy (by the
// Observer's history) and is gone is an orphan too.
func (c *Checker) NoOrphans(ctx context.Context) error {
	var orphans []string
	grace := c.NoOrphansGrace()
	err := c.copiesCached(ctx)
	if err != nil {
		return c.fail(ctx, &Failure{
			Assertion: "NoOrphans",
			Object:    "remote copies on every worker",
			Expected:  "the Observer's caches to hold what the workers' API servers list, to judge it",
			Problems:  []string{err.Error()},
		})
	}
	err = poll.Until(ctx, grace, "remote copies without a live manager counterpart to be removed", func(ctx context.Context) error {
		found, err := c.orphans(ctx)
		if err != nil {
			return err // keeps the last list read (the pods' read fails at the deadline)
		}
		orphans = found
		if len(orphans) > 0 {
			return fmt.Errorf("%d orphans", len(orphans))
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if len(orphans) == 0 {
		orphans = []string{err.Error()}
	}
	return c.fail(ctx, &Failure{
		Assertion: "NoOrphans",
		Object:    "remote copies on every worker",
		Expected: fmt.Sprintf("no remote Workload or Job without a live manager counterpart after %s (%s; remote copies are those whose %s label is MultiKueue's %s)", grace,
			c.Topo.Facts.Say(topology.FactGCInterval, c.Topo.Spec.GCInterval()), observe.LabelOrigin, c.Topo.Facts.Say(topology.FactOrigin, c.Topo.Spec.Kueue.Origin)),
		Problems: orphans,
	})
}

func (c *Checker) orphans(ctx context.Context) ([]string, error) {
	mgr := c.reader(c.Topo.Manager.Name)
	origin := c.Topo.Spec.Kueue.Origin
	now := time.Now()
	var out []string
	for _, w := range c.Topo.Workers {
		r := c.reader(w.Name)
		var wls kueue.WorkloadList
		if err := r.List(ctx, &wls, client.MatchingLabels{observe.LabelOrigin: origin}); err != nil {
			return nil, fmt.Errorf("cluster %q: list Workloads: %w", w.Name, err)
		}
		for i := range wls.Items {
			wl := &wls.Items[i]
			live, why, err := liveWorkload(ctx, mgr, client.ObjectKeyFromObject(wl))
			if err != nil {
				return nil, err
			}
			if !live {
				out = append(out, fmt.Sprintf("cluster %q: Workload %s/%s (age %s): %s", w.Name, wl.Namespace, wl.Name, age(now, wl), why))
			}
		}
		for _, kind := range c.Obs.JobKinds() {
			if kind == observe.KindPod && c.Obs.PodsUnread(w.Name) != nil {
				continue // its pods could not be read (said below, with the pods left behind)
			}
			found, err := jobOrphans(ctx, mgr, r, kind)
			if err != nil {
				return nil, fmt.Errorf("cluster %q: %w", w.Name, err)
			}
			for _, o := range found {
				out = append(out, fmt.Sprintf("cluster %q: %s %s/%s (age %s): %s", w.Name, kind, o.obj.GetNamespace(), o.obj.GetName(), age(now, o.obj), o.why))
			}
		}
	}
	if len(out) > 0 {
		return out, nil // the pods follow their Jobs; judge them once those are gone
	}
	var unread []string
	for _, w := range c.Topo.Workers {
		found, err := c.podOrphans(ctx, w.Name, w.Client)
		if apierrors.IsForbidden(err) {
			unread = append(unread, fmt.Sprintf("cluster %q: its pods could not be read (%v), so pods left behind were not looked for there", w.Name, err))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", w.Name, err)
		}
		for _, p := range found {
			out = append(out, fmt.Sprintf("cluster %q: Pod %s/%s (age %s, %s): %s", w.Name, p.obj.GetNamespace(), p.obj.GetName(), age(now, p.obj), p.obj.(*corev1.Pod).Status.Phase, p.why))
		}
	}
	if len(out) > 0 {
		out = append(out, unread...) // said where it matters: beside what was found
	}
	return out, nil
}

// podOrphans lists the pods on a worker (read from its API server: the
// Observer does not cache pods) whose controlling Job was a copy
// MultiKueue made there, by the Observer's history (its UID, with the
// origin label), and is gone: pods MultiKueue's cleanup left behind
// (kubernetes-sigs/kueue#5452). Pods being deleted are left to finish; a
// worker's own pods, and pods of a live Job, are not MultiKueue's business.
func (c *Checker) podOrphans(ctx context.Context, worker string, cl client.Reader) ([]orphan, error) {
	var pods corev1.PodList
	if err := cl.List(ctx, &pods); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, err
		}
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []orphan
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		// The Job controller's labels name the pod's Job; they stay when
		// the Job goes with orphan propagation, its owner reference not.
		name, uid := p.Labels[batchv1.JobNameLabel], types.UID(p.Labels[batchv1.ControllerUidLabel])
		if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "Job" {
			name, uid = owner.Name, owner.UID
		}
		if name == "" || uid == "" || !c.wasCopy(worker, p.Namespace, name, uid) {
			continue
		}
		job := &batchv1.Job{}
		err := cl.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, job)
		switch {
		case err == nil && job.UID == uid:
			continue // its Job is there: NoOrphans judged the Job
		case err != nil && !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("read Job %s/%s: %w", p.Namespace, name, err)
		}
		why := fmt.Sprintf("its Job %s/%s (uid %s) was MultiKueue's copy and is gone", p.Namespace, name, uid)
		if err == nil {
			why += fmt.Sprintf("; the Job of that name there now is another (uid %s)", job.UID)
		}
		out = append(out, orphan{p, why})
	}
	return out, nil
}

// wasCopy reports whether the Observer recorded Job namespace/name with
// uid on worker as MultiKueue's copy (its origin label).
func (c *Checker) wasCopy(worker, namespace, name string, uid types.UID) bool {
	evs, _ := c.Obs.History(observe.KindJob, namespace, name)
	for _, e := range evs {
		if e.Cluster == worker && e.UID == uid && observe.FromMultiKueue(e.Labels) {
			return true
		}
	}
	return false
}

func age(now time.Time, o client.Object) time.Duration {
	return now.Sub(o.GetCreationTimestamp().Time).Round(time.Second)
}

func liveWorkload(ctx context.Context, r client.Reader, key client.ObjectKey) (bool, string, error) {
	wl := &kueue.Workload{}
	if err := r.Get(ctx, key, wl); err != nil {
		if apierrors.IsNotFound(err) {
			return false, "no Workload of that name on the manager", nil
		}
		return false, "", err
	}
	if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		return false, "the manager Workload is Finished", nil
	}
	return true, "", nil
}

type orphan struct {
	obj client.Object
	why string
}

// jobOrphans lists the job objects of kind on a worker that MultiKueue
// created (origin label) and whose manager object is gone or finished.
func jobOrphans(ctx context.Context, mgr, worker client.Reader, kind observe.Kind) ([]orphan, error) {
	list, err := observe.NewJobList(kind)
	if err != nil {
		return nil, err
	}
	if err := worker.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list %ss: %w", kind, err)
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var out []orphan
	for _, item := range items {
		o, ok := item.(client.Object)
		if !ok {
			continue
		}
		if !observe.FromMultiKueue(o.GetLabels()) {
			continue // the worker's own (a prebuilt-workload-name alone is not MultiKueue's mark)
		}
		if owner := metav1.GetControllerOf(o); owner != nil {
			// Made on the worker by a controller, carrying its owner's
			// labels (a RayService's RayCluster): MultiKueue's copies have
			// no owner, and the owner is judged as its own kind.
			continue
		}
		live, why, err := liveJob(ctx, mgr, kind, client.ObjectKeyFromObject(o))
		if err != nil {
			return nil, err
		}
		if wlName := observe.PrebuiltWorkloadName(o); live && wlName != "" {
			// A Job of that name on the manager is not enough: a copy left
			// from an earlier Job of the same name names a Workload gone.
			var wlWhy string
			live, wlWhy, err = liveWorkload(ctx, mgr, client.ObjectKey{Namespace: o.GetNamespace(), Name: wlName})
			if err != nil {
				return nil, err
			}
			why = fmt.Sprintf("its %s=%s: %s", observe.LabelPrebuiltWorkload, wlName, wlWhy)
		}
		if uid := o.GetAnnotations()[observe.AnnotationOriginUID]; live && observe.PrebuiltWorkloadName(o) == "" && uid != "" {
			// A copy of a kind that serves several Workloads names the
			// manager's object by its UID: one of that name is not enough.
			live, why, err = sameUID(ctx, mgr, kind, client.ObjectKeyFromObject(o), uid)
			if err != nil {
				return nil, err
			}
		}
		if !live {
			out = append(out, orphan{o, why})
		}
	}
	return out, nil
}

func liveJob(ctx context.Context, r client.Reader, kind observe.Kind, key client.ObjectKey) (bool, string, error) {
	obj, live, why, err := managerJob(ctx, r, kind, key)
	if !live || err != nil {
		return live, why, err
	}
	st, _ := observe.JobStateOf(obj)
	switch {
	case st.Succeeded:
		return false, fmt.Sprintf("the manager %s succeeded", kind), nil
	case st.Failed:
		return false, fmt.Sprintf("the manager %s failed", kind), nil
	}
	return true, "", nil
}

// managerJob reads the manager's kind object at key; live false, and why,
// when there is none.
func managerJob(ctx context.Context, r client.Reader, kind observe.Kind, key client.ObjectKey) (client.Object, bool, string, error) {
	obj, err := observe.NewJobObject(kind)
	if err != nil {
		return nil, false, "", err
	}
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, fmt.Sprintf("no %s of that name on the manager", kind), nil
		}
		return nil, false, "", err
	}
	return obj, true, "", nil
}

// sameUID reports whether the manager's kind object at key has the UID a
// copy names (its origin-uid annotation), and why not.
func sameUID(ctx context.Context, r client.Reader, kind observe.Kind, key client.ObjectKey, uid string) (bool, string, error) {
	obj, live, why, err := managerJob(ctx, r, kind, key)
	if !live || err != nil {
		return live, why, err
	}
	if string(obj.GetUID()) != uid {
		return false, fmt.Sprintf("its %s=%s names an earlier %s: the manager's is %s", observe.AnnotationOriginUID, uid, kind, obj.GetUID()), nil
	}
	return true, "", nil
}
