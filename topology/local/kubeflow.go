package local

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology"
)

// The Kubeflow training-operator (PyTorchJob, TFJob, XGBoostJob, PaddleJob,
// JAXJob) runs as a binary built from github.com/kubeflow/training-operator
// at the version the Kueue under test requires in its go.mod (v1.9.3 for
// v0.19.2), on every worker of a topology with one of those integrations:
// upstream's controllers and validating webhooks, for the enabled kinds only,
// under a main of this library's (internal/assets/mains), because
// upstream's serves on fixed ports and waits for its webhook certificate in
// a fixed /tmp directory, so a second one on the host cannot start. Its CRDs
// come from the same module (manifests/base/crds), its webhook registrations
// from manifests/base/webhook. The manager's jobs are MultiKueue's
// (spec.runPolicy.managedBy), which the operator leaves alone; the manager
// runs no operator. KWOK plays the pods (they run for the run-duration
// annotation the workload builders set), the Job controller is not
// involved: the operator creates the pods and Services itself.

// trainingOperatorWebhooks is the training-operator's webhook manifest in its
// module, and trainingOperatorWebhookPrefix prefixes its registration's name
// (upstream names it validating-webhook-configuration).
const (
	trainingOperatorWebhooks      = "manifests/base/webhook/manifests.yaml"
	trainingOperatorWebhookPrefix = "kubeflow-training-"
)

// kubeflowScheme is the training-operator's scheme (its job kind) for a
// Kueue integration, false for other integrations.
func kubeflowScheme(integration string) (string, bool) {
	switch integration {
	case topology.IntegrationPyTorchJob:
		return "PyTorchJob", true
	case topology.IntegrationTFJob:
		return "TFJob", true
	case topology.IntegrationXGBoostJob:
		return "XGBoostJob", true
	case topology.IntegrationPaddleJob:
		return "PaddleJob", true
	case topology.IntegrationJAXJob:
		return "JAXJob", true
	}
	return "", false
}

// kubeflowSchemes are the training-operator's schemes the integrations
// enable, in their order.
func kubeflowSchemes(integrations []string) []string {
	var out []string
	for _, in := range integrations {
		if s, ok := kubeflowScheme(in); ok {
			out = append(out, s)
		}
	}
	return out
}

// ensureTrainingOperator finds or builds the training-operator binary at the
// version the Kueue binary bin requires in its go.mod.
func ensureTrainingOperator(ctx context.Context, ao assets.Options, bin assets.Kueue) (assets.Operator, error) {
	return ensureOperator(ctx, ao, bin, assets.TrainingOperator())
}

// startTrainingOperator starts worker lc's training-operator for schemes and
// registers the webhooks it serves.
func (lc *localCluster) startTrainingOperator(ctx context.Context, c *topology.Cluster, op assets.Operator, hooks webhookConfigs, schemes []string, o Options) error {
	b := &controllerBinary{name: "training-operator", cluster: lc.name, path: op.Path, version: op.Version,
		dir: filepath.Join(lc.cp.dir, "training-operator"), timeout: o.StartTimeout}
	if err := b.allocate(lc.cp); err != nil {
		return err
	}
	if err := b.writeServingCert(lc.cp, "webhook-certs"); err != nil {
		return fmt.Errorf("cluster %q: the training-operator's certificate: %w", lc.name, err)
	}
	kubeconfig := filepath.Join(b.dir, "training-operator.kubeconfig")
	if err := lc.cp.writeClientKubeconfig(kubeconfig, trainingOperatorUser, lc.cp.trainingOperator); err != nil {
		return err
	}
	b.configure = func() error {
		b.args = []string{
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", b.metricsPort),
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", b.healthPort),
			fmt.Sprintf("--webhook-server-port=%d", b.webhookPort),
			"--webhook-cert-dir=" + filepath.Join(b.dir, "webhook-certs"),
			"--enable-schemes=" + strings.Join(schemes, ","),
		}
		return nil
	}
	b.env = []string{"KUBECONFIG=" + kubeconfig}
	return lc.startServingWebhooks(ctx, c, b, hooks)
}
