package local

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// ownerGC plays the part of kube-controller-manager's garbage collector that
// Kueue relies on: a Workload whose controlling owner (a Job) is gone is
// deleted. Without it, deleting a Job would leave its Workload, and the
// remote copies, behind on a local topology, where no controller-manager runs.
type ownerGC struct {
	cluster string
	client  client.Client
	api     client.Reader
}

func setupOwnerGC(cluster string, mgr manager.Manager) error {
	g := &ownerGC{cluster: cluster, client: mgr.GetClient(), api: mgr.GetAPIReader()}
	return ctrl.ControllerManagedBy(mgr).Named("mktk-owner-gc").
		For(&kueue.Workload{}).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(g.ownedBy)).
		Complete(g)
}

// ownedBy maps a Job to the Workloads it controls.
func (g *ownerGC) ownedBy(ctx context.Context, obj client.Object) []reconcile.Request {
	var wls kueue.WorkloadList
	if err := g.client.List(ctx, &wls, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, wl := range wls.Items {
		for _, ref := range wl.OwnerReferences {
			if ref.UID == obj.GetUID() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&wl)})
			}
		}
	}
	return out
}

func (g *ownerGC) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	wl := &kueue.Workload{}
	if err := g.client.Get(ctx, req.NamespacedName, wl); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !wl.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	for _, ref := range wl.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		owner := &metav1.PartialObjectMetadata{}
		owner.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
		err := g.api.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: ref.Name}, owner)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && owner.UID != ref.UID):
			if err := g.client.Delete(ctx, wl, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("cluster %q: delete orphaned Workload %s: %w", g.cluster, req.NamespacedName, err)
			}
			return reconcile.Result{}, nil
		case err != nil:
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}
