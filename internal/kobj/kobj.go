// Package kobj holds what the library's probes and the module's tests do to
// objects on a cluster of a topology: remove one for good, and make an API
// server deny some writes through a ValidatingAdmissionPolicy.
package kobj

import (
	"context"
	"errors"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// Remove deletes obj from cl (dropping its finalizers) and waits up to a
// minute until it is gone.
func Remove(ctx context.Context, cl *topology.Cluster, obj client.Object) error {
	return poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: %T %s to be deleted", cl.Name, obj, client.ObjectKeyFromObject(obj)), func(ctx context.Context) error {
		cur := obj.DeepCopyObject().(client.Object)
		if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if len(cur.GetFinalizers()) > 0 {
			cur.SetFinalizers(nil)
			if err := cl.Client.Update(ctx, cur); err != nil {
				return err
			}
		}
		if err := cl.Client.Delete(ctx, cur, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return errors.New("still there")
	})
}

// Deny makes cl's API server deny the ops on rule's resources that match
// (a CEL match condition) and fail validation (a CEL expression), with
// message, through a ValidatingAdmissionPolicy and its binding named name.
// lift removes both. The caller probes until the policy is enforced (the
// API server takes it up within a second or so).
func Deny(ctx context.Context, cl *topology.Cluster, name string, ops []admissionregistrationv1.OperationType, rule admissionregistrationv1.Rule, match, validation, message string) (lift func() error, err error) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: rule},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "match", Expression: match}},
			Validations:     []admissionregistrationv1.Validation{{Expression: validation, Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	lift = func() error {
		var errs []error
		for _, o := range []client.Object{binding, policy} {
			if err := cl.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("cluster %q: delete %T %s: %w", cl.Name, o, name, err))
			}
		}
		return errors.Join(errs...)
	}
	for _, o := range []client.Object{policy, binding} {
		if err := cl.Client.Create(ctx, o); err != nil {
			return nil, errors.Join(fmt.Errorf("cluster %q: create %T %s: %w", cl.Name, o, name, err), lift())
		}
	}
	return lift, nil
}
