package local

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// ownerGC plays the part of kube-controller-manager's garbage collector that
// Kueue relies on: a Workload whose controlling owner (a Job) is gone is
// deleted. Without it, deleting a Job (or JobSet, RayJob) would leave its Workload, and the
// remote copies, behind on a local topology, where no controller-manager runs.
type ownerGC struct {
	cluster string
	client  client.Client
	api     client.Reader
}

// ownerUIDIndex indexes Workloads by the UIDs of their owners.
const ownerUIDIndex = "mktk.ownerUID"

// jobOwnerKinds are the kinds whose deletion the owner GC follows: batch/Job,
// and the job CRDs installed (JobSet, RayJob, RayCluster).
func jobOwnerKinds(crds []*apiextensionsv1.CustomResourceDefinition) []schema.GroupVersionKind {
	out := []schema.GroupVersionKind{batchv1.SchemeGroupVersion.WithKind("Job")}
	for _, crd := range crds {
		switch crd.Spec.Group + "/" + crd.Spec.Names.Kind {
		case "jobset.x-k8s.io/JobSet", "ray.io/RayJob", "ray.io/RayCluster":
			for _, v := range crd.Spec.Versions {
				if v.Storage {
					out = append(out, schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind})
				}
			}
		}
	}
	return out
}

func setupOwnerGC(ctx context.Context, cluster string, mgr manager.Manager, owners []schema.GroupVersionKind) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &kueue.Workload{}, ownerUIDIndex, func(o client.Object) []string {
		var uids []string
		for _, ref := range o.GetOwnerReferences() {
			uids = append(uids, string(ref.UID))
		}
		return uids
	}); err != nil {
		return err
	}
	g := &ownerGC{cluster: cluster, client: mgr.GetClient(), api: mgr.GetAPIReader()}
	// Owners change only when a Workload is created or its owner deleted:
	// watch just those, so the uncached owner lookups stay few.
	onCreate := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		UpdateFunc: func(event.UpdateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
	onDelete := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(event.UpdateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return true },
	}
	b := ctrl.ControllerManagedBy(mgr).Named("mktk-owner-gc").
		For(&kueue.Workload{}, ctrl.WithPredicates(onCreate))
	for _, gvk := range owners {
		owner := &metav1.PartialObjectMetadata{}
		owner.SetGroupVersionKind(gvk)
		b = b.Watches(owner, handler.EnqueueRequestsFromMapFunc(g.ownedBy), ctrl.WithPredicates(onDelete))
	}
	return b.Complete(g)
}

// ownedBy maps a job object to the Workloads it controls.
func (g *ownerGC) ownedBy(ctx context.Context, obj client.Object) []reconcile.Request {
	var wls kueue.WorkloadList
	if err := g.client.List(ctx, &wls, client.InNamespace(obj.GetNamespace()), client.MatchingFields{ownerUIDIndex: string(obj.GetUID())}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(wls.Items))
	for i := range wls.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&wls.Items[i])})
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
