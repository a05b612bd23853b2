package assert

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
)

// NoOrphansSettle is how long NoOrphans waits for ordinary cleanup when
// MultiKueue's garbage collector is disabled.
const NoOrphansSettle = 15 * time.Second

// NoOrphansGrace is how long NoOrphans waits for remote copies to go: twice
// the configured gcInterval plus NoOrphansSettle, or NoOrphansSettle alone
// when garbage collection is disabled (gcInterval 0).
func (c *Checker) NoOrphansGrace() time.Duration {
	gc := c.Topo.Spec.GCInterval
	if gc <= 0 {
		return NoOrphansSettle
	}
	return 2*gc + NoOrphansSettle
}

// NoOrphans checks that no worker keeps a Workload or job object that
// MultiKueue created (labelled kueue.x-k8s.io/multikueue-origin or
// kueue.x-k8s.io/prebuilt-workload-name) without a live manager counterpart:
// the manager object of the same namespace and name must exist and not be
// finished. It waits up to NoOrphansGrace for cleanup, then names each
// orphan, its cluster and its age.
//
// Reads come from the Observer's caches: the check costs no API requests,
// whatever the number of workloads. It checks batch/Jobs and Workloads; other
// job kinds are not listed.
func (c *Checker) NoOrphans(ctx context.Context) error {
	var orphans []string
	grace := c.NoOrphansGrace()
	err := poll.Until(ctx, grace, "remote copies without a live manager counterpart to be removed", func(ctx context.Context) error {
		var err error
		orphans, err = c.orphans(ctx)
		if err != nil {
			return err
		}
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
		Expected:  fmt.Sprintf("no remote Workload or Job without a live manager counterpart after %s (gcInterval %s)", grace, c.Topo.Spec.GCInterval),
		Problems:  orphans,
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
		var jobs batchv1.JobList
		if err := r.List(ctx, &jobs); err != nil {
			return nil, fmt.Errorf("cluster %q: list Jobs: %w", w.Name, err)
		}
		for i := range jobs.Items {
			j := &jobs.Items[i]
			_, hasOrigin := j.Labels[observe.LabelOrigin]
			_, hasPrebuilt := j.Labels[observe.LabelPrebuiltWorkload]
			if !hasOrigin && !hasPrebuilt {
				continue
			}
			live, why, err := liveJob(ctx, mgr, client.ObjectKeyFromObject(j))
			if err != nil {
				return nil, err
			}
			if !live {
				out = append(out, fmt.Sprintf("cluster %q: Job %s/%s (age %s): %s", w.Name, j.Namespace, j.Name, age(now, j), why))
			}
		}
	}
	return out, nil
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

func liveJob(ctx context.Context, r client.Reader, key client.ObjectKey) (bool, string, error) {
	j := &batchv1.Job{}
	if err := r.Get(ctx, key, j); err != nil {
		if apierrors.IsNotFound(err) {
			return false, "no Job of that name on the manager", nil
		}
		return false, "", err
	}
	for _, cond := range j.Status.Conditions {
		if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == corev1.ConditionTrue {
			return false, "the manager Job is " + string(cond.Type), nil
		}
	}
	return true, "", nil
}
