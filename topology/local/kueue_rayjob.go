package local

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/controller/jobs/rayjob"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
)

// Kueue v0.17.0's RayJob integration keeps its reconciler in a package-level
// variable (pkg/controller/jobs/rayjob/rayjob_controller.go: `var reconciler
// rayJobReconciler`; NewReconciler overwrites it and returns its address), so
// with several Kueue managers in one process every cluster's RayJob
// controller reconciles with the client of the Kueue built last: a worker's
// RayJob was never unsuspended. The local topology therefore sets the RayJob
// integration up itself, one reconciler per cluster, exactly as
// rayJobReconciler.SetupWithManager does, and leaves it out of
// jobframework.SetupControllers. (RayService and TrainJob have the same
// pattern; the local topology does not offer them.)

// setupRayJobIntegration sets up Kueue's RayJob webhook and a RayJob
// reconciler of this manager's own, when the integration is enabled, and
// returns the frameworks jobframework.SetupControllers still has to set up.
// The webhook is registered first: SetupControllers then registers a no-op
// webhook for the left-out integration, which controller-runtime ignores for
// a path already served.
func setupRayJobIntegration(mgr manager.Manager, frameworks []string, opts ...jobframework.Option) ([]string, error) {
	if !slices.Contains(frameworks, rayjob.FrameworkName) {
		return frameworks, nil
	}
	if err := rayjob.SetupRayJobWebhook(mgr, opts...); err != nil {
		return nil, fmt.Errorf("jobFrameworkName %q: unable to create webhook: %w", rayjob.FrameworkName, err)
	}
	// As jobframework's setupControllerAndWebhook names the recorder.
	recorder := mgr.GetEventRecorderFor(fmt.Sprintf("%s-%s-controller", rayjob.FrameworkName, constants.KueueName))
	r := &rayJobReconciler{jr: jobframework.NewReconciler(mgr.GetClient(), recorder, opts...)}
	kind := strings.ToLower((&rayjob.RayJob{}).GVK().Kind)
	err := ctrl.NewControllerManagedBy(mgr).
		For(&rayv1.RayJob{}).Owns(&kueue.Workload{}).
		WithOptions(controller.Options{LogConstructor: roletracker.NewLogConstructor(r.jr.RoleTracker(), kind)}).
		Watches(&rayv1.RayCluster{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &rayv1.RayJob{}, handler.OnlyControllerOwner())).
		Complete(r)
	if err != nil {
		return nil, fmt.Errorf("jobFrameworkName %q: %w", rayjob.FrameworkName, err)
	}
	// What jobframework does once an integration's controller is set up
	// (process-global, like the integration registry itself).
	jobframework.EnableIntegration(rayjob.FrameworkName)
	return slices.DeleteFunc(slices.Clone(frameworks), func(f string) bool { return f == rayjob.FrameworkName }), nil
}

// rayJobReconciler is Kueue's rayJobReconciler, one per manager.
type rayJobReconciler struct {
	jr *jobframework.JobReconciler
}

// Reconcile implements reconcile.Reconciler.
func (r *rayJobReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.jr.ReconcileGenericJob(ctx, req, &rayjob.RayJob{})
}
