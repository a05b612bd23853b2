package local

import (
	"context"
	"path/filepath"
	"slices"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology"
)

// The LeaderWorkerSet controller runs as its binary (sigs.k8s.io/lws's
// cmd/main.go at the version the Kueue under test requires in its go.mod:
// v0.9.0 for v0.19.2), on every cluster of a topology with the
// LeaderWorkerSet integration, as Kueue's e2e tests install it on the
// manager and the workers: on the manager it makes each group's
// StatefulSets, whose pods Kueue's pod integration keeps gated while
// MultiKueue runs the copy on a worker. Its CRD comes from the same module
// (config/crd/bases), its webhook registrations from config/webhook, with
// the object selector its kustomization patches onto the pod webhooks (only
// a LeaderWorkerSet's pods). kube-controller-manager's StatefulSet
// controller makes the pods (builtinControllers).

// lwsWebhookPrefix prefixes the LeaderWorkerSet controller's webhook
// configuration names; lwsPodLabel selects its pod webhooks' pods
// (config/webhook/mutating-patch.yaml and validating-patch.yaml).
const (
	lwsWebhooks      = "config/webhook/manifests.yaml"
	lwsWebhookPrefix = "lws-"
	lwsPodLabel      = "leaderworkerset.sigs.k8s.io/name"
)

// loadLWSWebhooks reads the LeaderWorkerSet controller's webhook
// registrations from its source tree at root, with its kustomization's
// patch: its pod webhooks see only the pods of a LeaderWorkerSet.
func loadLWSWebhooks(root string) (webhookConfigs, error) {
	hooks, err := loadWebhookConfigsFile(filepath.Join(root, lwsWebhooks), lwsWebhookPrefix)
	if err != nil {
		return hooks, err
	}
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: lwsPodLabel, Operator: metav1.LabelSelectorOpExists}}}
	for _, m := range hooks.mutating {
		for i := range m.Webhooks {
			if isPodRule(m.Webhooks[i].Rules) {
				m.Webhooks[i].ObjectSelector = sel.DeepCopy()
			}
		}
	}
	for _, v := range hooks.validating {
		for i := range v.Webhooks {
			if isPodRule(v.Webhooks[i].Rules) {
				v.Webhooks[i].ObjectSelector = sel.DeepCopy()
			}
		}
	}
	return hooks, nil
}

// startLWS starts cluster c's LeaderWorkerSet controller binary,
// configured by a file as JobSet's, and registers the webhooks it serves.
func (lc *localCluster) startLWS(ctx context.Context, c *topology.Cluster, op assets.Operator, hooks webhookConfigs, o Options) error {
	return lc.startConfigured(ctx, c, op, "config.lws.x-k8s.io/v1alpha1", false, hooks, lwsUser, lc.cp.lws, o)
}

// isPodRule reports whether a webhook's rules name pods.
func isPodRule(rules []admissionv1.RuleWithOperations) bool {
	for _, r := range rules {
		if slices.Contains(r.Resources, "pods") {
			return true
		}
	}
	return false
}
