package install

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestIsWebhookUnavailable(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{`Internal error occurred: failed calling webhook "mworkload.kb.io": failed to call webhook: Post "https://kueue-webhook-service.kueue-system.svc:443/mutate-kueue-x-k8s-io-v1beta2-workload?timeout=10s": no endpoints available for service "kueue-webhook-service"`, true},
		{`Internal error occurred: failed calling webhook "vclusterqueue.kb.io": failed to call webhook: Post "https://kueue-webhook-service.kueue-system.svc:443/validate": tls: failed to verify certificate: x509: certificate signed by unknown authority`, true},
		{`conversion webhook for kueue.x-k8s.io/v1beta1, Kind=ClusterQueue failed: Post "https://kueue-webhook-service.kueue-system.svc:443/convert?timeout=30s": dial tcp 10.96.0.7:443: connect: connection refused`, true},
		{`admission webhook "vclusterqueue.kb.io" denied the request: spec.resourceGroups[0]: Invalid value`, false},
		{`clusterqueues.kueue.x-k8s.io "cq" already exists`, false},
	} {
		if got := IsWebhookUnavailable(errors.New(tc.msg)); got != tc.want {
			t.Errorf("IsWebhookUnavailable(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
	if IsWebhookUnavailable(nil) {
		t.Error("IsWebhookUnavailable(nil) = true")
	}
}

func TestDeploymentState(t *testing.T) {
	avail := func(s corev1.ConditionStatus) []appsv1.DeploymentCondition {
		return []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: s, Reason: "MinimumReplicasAvailable"}}
	}
	d := func(gen, observed int64, updated, available int32, conds []appsv1.DeploymentCondition) *appsv1.Deployment {
		x := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}}
		x.Generation = gen
		x.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, AvailableReplicas: available, Conditions: conds}
		return x
	}
	for name, tc := range map[string]struct {
		d  *appsv1.Deployment
		ok bool
	}{
		"rolled out":             {d(2, 2, 2, 2, avail(corev1.ConditionTrue)), true},
		"new generation unseen":  {d(3, 2, 2, 2, avail(corev1.ConditionTrue)), false},
		"old replicas available": {d(2, 2, 1, 2, avail(corev1.ConditionTrue)), false},
		"not Available":          {d(2, 2, 2, 2, avail(corev1.ConditionFalse)), false},
		"no condition":           {d(2, 2, 2, 2, nil), false},
	} {
		if err := deploymentState(tc.d); (err == nil) != tc.ok {
			t.Errorf("%s: deploymentState = %v, want ok=%v", name, err, tc.ok)
		}
	}
}

func TestEndpointsState(t *testing.T) {
	ep := func(ready *bool) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{{Conditions: discoveryv1.EndpointConditions{Ready: ready}}}}
	}
	if err := endpointsState(nil); err == nil {
		t.Error("no slices: ready")
	}
	if err := endpointsState([]discoveryv1.EndpointSlice{ep(ptr.To(false))}); err == nil {
		t.Error("an unready endpoint: ready")
	}
	if err := endpointsState([]discoveryv1.EndpointSlice{ep(ptr.To(false)), ep(ptr.To(true))}); err != nil {
		t.Errorf("a ready endpoint: %v", err)
	}
}
