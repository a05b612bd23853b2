package assert

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// copiesCached waits until the Observer's cache of every worker holds each
// MultiKueue copy (a Workload or job object with the origin label) that the
// worker's API server lists now. An informer's cache trails its API server
// by a few milliseconds: without this, a copy made just before NoOrphans
// could be missed, and the assertion pass where it must fail (found in CI:
// a stale LeaderWorkerSet created 0.35 s before the check was not in the
// cache yet). It costs one metadata list per watched kind per worker, the
// only API requests NoOrphans makes besides the pods' list.
func (c *Checker) copiesCached(ctx context.Context) error {
	kinds := append([]observe.Kind{observe.KindWorkload}, c.Obs.JobKinds()...)
	return poll.Until(ctx, c.timeout(), "the Observer's caches to hold every MultiKueue copy the workers' API servers list", func(ctx context.Context) error {
		for _, w := range c.Topo.Workers {
			for _, kind := range kinds {
				if kind == observe.KindPod && c.Obs.PodsUnread(w.Name) != nil {
					continue // the Observer does not watch its pods
				}
				if err := c.copiesCachedOn(ctx, w, kind); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// copiesCachedOn checks one kind on one worker: every copy its API server
// lists is in the Observer's cache with the same UID.
func (c *Checker) copiesCachedOn(ctx context.Context, w *topology.Cluster, kind observe.Kind) error {
	var obj client.Object = &kueue.Workload{}
	if kind != observe.KindWorkload {
		var err error
		if obj, err = observe.NewJobObject(kind); err != nil {
			return poll.Stop(err)
		}
	}
	gvk, err := apiutil.GVKForObject(obj, w.Client.Scheme())
	if err != nil {
		return poll.Stop(fmt.Errorf("cluster %q: %s: %w", w.Name, kind, err))
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := w.Client.List(ctx, list, client.HasLabels{observe.LabelOrigin}); err != nil {
		return fmt.Errorf("cluster %q: list %ss from its API server: %w", w.Name, kind, err)
	}
	r := c.reader(w.Name)
	for i := range list.Items {
		m := &list.Items[i]
		cached := obj.DeepCopyObject().(client.Object)
		err := r.Get(ctx, client.ObjectKeyFromObject(m), cached)
		if err != nil || cached.GetUID() != m.UID {
			return fmt.Errorf("cluster %q: %s %s/%s (uid %s) is on its API server and %s", w.Name, kind, m.Namespace, m.Name, m.UID, notCached(err, cached.GetUID()))
		}
	}
	return nil
}

func notCached(err error, uid types.UID) string {
	if err != nil {
		return fmt.Sprintf("not in the Observer's cache (%v)", err)
	}
	return fmt.Sprintf("the Observer's cache holds another (uid %s)", uid)
}
