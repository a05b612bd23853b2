package connect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// GuardTimeout bounds the wait until a worker's API server enforces (or, on
// removal, stops enforcing) the guard.
const GuardTimeout = time.Minute

// GuardName is the name of the guard's ValidatingAdmissionPolicy and of its
// binding on a worker, for the MultiKueue ServiceAccount serviceAccount.
func GuardName(serviceAccount types.NamespacedName) string {
	return "multikueue-guard." + serviceAccount.Namespace + "." + serviceAccount.Name
}

// InstallGuard installs on worker a ValidatingAdmissionPolicy and its binding
// (admissionregistration.k8s.io/v1) that deny the MultiKueue ServiceAccount
// any UPDATE or DELETE of a Workload or a job object (the resources of the
// given Kueue integrations, and their status) that lacks the
// kueue.x-k8s.io/multikueue-origin label: MultiKueue may then change only the
// objects it created. Everyone else, and MultiKueue's own copies, are not
// affected. It returns once the API server enforces the policy (probed with
// a dry-run delete of a suspended probe Job, impersonating the
// ServiceAccount), within GuardTimeout; the caller needs the rights to
// create admission policies and to impersonate the ServiceAccount.
//
// Why: Kueue v0.17.0's MultiKueue deletes a worker's own job object that
// merely has the name of a manager job (kubernetes-sigs/kueue#11849). With the
// guard the deletion is denied; Kueue logs the error and retries, and a
// workload whose losing worker holds such an object is not dispatched while
// it is there (MultiKueue stops at the failed deletion).
//
// It is idempotent: calling it again updates the policy to the given
// integrations.
func InstallGuard(ctx context.Context, worker *topology.Cluster, serviceAccount types.NamespacedName, integrations []string) error {
	if serviceAccount.Namespace == "" || serviceAccount.Name == "" {
		return fmt.Errorf("cluster %q: guard: serviceAccount: want namespace/name, got %q", worker.Name, serviceAccount.String())
	}
	name := GuardName(serviceAccount)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := ensure(ctx, worker, policy, func() { policy.Spec = guardPolicySpec(serviceAccount, integrations) }); err != nil {
		return err
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := ensure(ctx, worker, binding, func() {
		binding.Spec = admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		}
	}); err != nil {
		return err
	}
	return waitGuard(ctx, worker, serviceAccount, true)
}

// RemoveGuard deletes the guard InstallGuard installed for serviceAccount on
// worker and returns once the API server no longer enforces it, within
// GuardTimeout. Removing a guard that is not there is not an error.
func RemoveGuard(ctx context.Context, worker *topology.Cluster, serviceAccount types.NamespacedName) error {
	if err := deleteGuard(ctx, worker, serviceAccount); err != nil {
		return err
	}
	return waitGuard(ctx, worker, serviceAccount, false)
}

// deleteGuard deletes the guard's policy and binding without waiting: what
// Revoke does once the ServiceAccount is gone (a probe impersonating it can
// no longer tell whether the policy is lifted, nor can anyone act as it).
func deleteGuard(ctx context.Context, worker *topology.Cluster, serviceAccount types.NamespacedName) error {
	name := GuardName(serviceAccount)
	for _, o := range []client.Object{
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
	} {
		if err := worker.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cluster %q: delete %T %s: %w", worker.Name, o, name, err)
		}
	}
	return nil
}

func guardPolicySpec(sa types.NamespacedName, integrations []string) admissionregistrationv1.ValidatingAdmissionPolicySpec {
	ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Update, admissionregistrationv1.Delete}
	rule := func(group string, resources ...string) admissionregistrationv1.NamedRuleWithOperations {
		var all []string
		for _, r := range resources {
			all = append(all, r, r+"/status")
		}
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: all},
		}}
	}
	rules := []admissionregistrationv1.NamedRuleWithOperations{rule(kueue.SchemeGroupVersion.Group, "workloads")}
	byGroup := map[string][]string{}
	var groups []string
	for _, in := range append([]string{topology.IntegrationBatchJob}, integrations...) {
		g, r, ok := jobResource(in)
		if !ok {
			continue
		}
		if _, seen := byGroup[g]; !seen {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], r)
	}
	for _, g := range groups {
		rules = append(rules, rule(g, dedupe(byGroup[g])...))
	}
	user := serviceAccountUser(sa)
	return admissionregistrationv1.ValidatingAdmissionPolicySpec{
		FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
		MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: rules},
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name: "multikueue-service-account", Expression: fmt.Sprintf("request.userInfo.username == %q", user),
		}},
		Validations: []admissionregistrationv1.Validation{{
			// For DELETE only oldObject is set; for UPDATE the object as it
			// was decides, so MultiKueue cannot adopt an object by labelling it.
			Expression: fmt.Sprintf("has(oldObject.metadata.labels) && %q in oldObject.metadata.labels", kueue.MultiKueueOriginLabel),
			MessageExpression: fmt.Sprintf(`%q + request.operation + " " + request.resource.resource + " " + request.namespace + "/" + request.name + %q`,
				"testkit guard: MultiKueue ("+user+") may not ",
				": it lacks the "+kueue.MultiKueueOriginLabel+" label, MultiKueue did not create it"),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	}
}

func serviceAccountUser(sa types.NamespacedName) string {
	return "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
}

// waitGuard polls, with a dry-run delete of a probe Job impersonating the
// ServiceAccount, until the guard is enforced (want) or no longer is.
func waitGuard(ctx context.Context, worker *topology.Cluster, sa types.NamespacedName, want bool) error {
	cfg := rest.CopyConfig(worker.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: serviceAccountUser(sa),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"},
	}
	as, err := client.New(cfg, client.Options{Scheme: worker.Client.Scheme(), Mapper: worker.Client.RESTMapper()})
	if err != nil {
		return fmt.Errorf("cluster %q: guard probe client: %w", worker.Name, err)
	}
	probe := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "multikueue-guard-probe-", Namespace: sa.Namespace},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}},
			}},
		},
	}
	if err := worker.Client.Create(ctx, probe); err != nil {
		return fmt.Errorf("cluster %q: create guard probe Job in namespace %s: %w", worker.Name, sa.Namespace, err)
	}
	defer func() {
		_ = worker.Client.Delete(context.WithoutCancel(ctx), probe, client.PropagationPolicy(metav1.DeletePropagationBackground))
	}()
	what := fmt.Sprintf("cluster %q: ValidatingAdmissionPolicy %s to deny %s deleting Job %s/%s", worker.Name, GuardName(sa), sa, probe.Namespace, probe.Name)
	if !want {
		what = fmt.Sprintf("cluster %q: ValidatingAdmissionPolicy %s to be lifted (%s may delete Job %s/%s)", worker.Name, GuardName(sa), sa, probe.Namespace, probe.Name)
	}
	return poll.Until(ctx, GuardTimeout, what, func(ctx context.Context) error {
		err := as.Delete(ctx, probe, client.DryRunAll)
		denied := err != nil && strings.Contains(err.Error(), "testkit guard:")
		switch {
		case want && denied, !want && err == nil:
			return nil
		case apierrors.IsForbidden(err) && !denied:
			// RBAC, or impersonation not allowed: waiting will not help
			// unless the ServiceAccount's role is still being set up.
			return fmt.Errorf("the probe delete was refused, not by the guard: %w", err)
		case err == nil:
			return errors.New("not enforced yet: the dry-run delete was allowed")
		}
		return fmt.Errorf("still enforced: %w", err)
	})
}
