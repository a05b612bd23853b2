package local

import (
	"context"
	"net"
	"strconv"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology"
)

// The Kubeflow Trainer (trainer.kubeflow.org, v2) runs as its binary
// (github.com/kubeflow/trainer/v2's cmd/trainer-controller-manager at the
// version the Kueue under test requires in its go.mod: v2.2.1 for v0.19.2)
// on every worker of a topology with the TrainJob integration, with the
// CRDs (manifests/base/crds) and webhook registrations
// (manifests/base/webhook) of the same module. It turns a TrainJob into a
// JobSet, which the JobSet controller runs (the TrainJob integration needs
// the JobSet integration). The manager's TrainJobs are MultiKueue's
// (spec.managedBy), which the Trainer leaves alone; the manager runs none,
// but Kueue there reads the ClusterTrainingRuntime a TrainJob names.
//
// Its configuration (config.trainer.kubeflow.org/v1alpha1, decoded
// strictly) has no certificate directory: its webhook server takes
// controller-runtime's default, <TMPDIR>/k8s-webhook-server/serving-certs,
// so the process runs with TMPDIR set to its own directory, where that
// certificate is written; its certificate management and leader election
// are off.

const (
	trainerWebhooks      = "manifests/base/webhook/manifests.yaml"
	trainerWebhookPrefix = "trainer-"
	// trainerCertDir is controller-runtime's default webhook certificate
	// directory below TMPDIR.
	trainerCertDir = "k8s-webhook-server/serving-certs"
)

// startTrainer starts worker lc's Kubeflow Trainer and registers its
// webhooks once it serves them all: it adds their handlers only after it
// answers /readyz, and a TrainJob's validation is what tells a caller that
// the Trainer's cache holds its runtime (scenario's ensureRuntime).
func (lc *localCluster) startTrainer(ctx context.Context, c *topology.Cluster, op assets.Operator, hooks webhookConfigs, o Options) error {
	return lc.startWithConfigFile(ctx, c, op, []string{trainerCertDir}, []string{"TMPDIR=$DIR"}, true, func(b *controllerBinary) map[string]any {
		addr := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
		return map[string]any{
			"apiVersion":     "config.trainer.kubeflow.org/v1alpha1",
			"kind":           "Configuration",
			"health":         map[string]any{"healthProbeBindAddress": addr(b.healthPort), "readinessEndpointName": "readyz", "livenessEndpointName": "healthz"},
			"metrics":        map[string]any{"bindAddress": addr(b.metricsPort), "secureServing": false},
			"webhook":        map[string]any{"port": b.webhookPort, "host": "127.0.0.1"},
			"leaderElection": map[string]any{"leaderElect": false},
			"certManagement": map[string]any{"enable": false},
		}
	}, hooks, trainerUser, lc.cp.trainer, o)
}
