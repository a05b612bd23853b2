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
	return lc.startOurMain(ctx, c, op, hooks, trainingOperatorUser, lc.cp.trainingOperator, o, "--enable-schemes="+strings.Join(schemes, ","))
}

// startOurMain starts worker lc's operator op, one built with a main of
// this library's (internal/assets/mains: the flags below are theirs), as
// user with client identity id, and registers the webhooks it serves.
func (lc *localCluster) startOurMain(ctx context.Context, c *topology.Cluster, op assets.Operator, hooks webhookConfigs, user string, id keyPair, o Options, extra ...string) error {
	b := &controllerBinary{name: op.Name, cluster: lc.name, path: op.Path, version: op.Version,
		dir: filepath.Join(lc.cp.dir, op.Name), timeout: o.StartTimeout}
	if err := b.allocate(lc.cp); err != nil {
		return err
	}
	if err := b.writeServingCert(lc.cp, "webhook-certs"); err != nil {
		return fmt.Errorf("cluster %q: %s's serving certificate: %w", lc.name, op.Name, err)
	}
	kubeconfig := filepath.Join(b.dir, op.Name+".kubeconfig")
	if err := lc.cp.writeClientKubeconfig(kubeconfig, user, id); err != nil {
		return err
	}
	b.configure = func() error {
		b.args = append([]string{
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", b.metricsPort),
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", b.healthPort),
			fmt.Sprintf("--webhook-server-port=%d", b.webhookPort),
			"--webhook-cert-dir=" + filepath.Join(b.dir, "webhook-certs"),
		}, extra...)
		return nil
	}
	b.env = []string{"KUBECONFIG=" + kubeconfig}
	return lc.startServingWebhooks(ctx, c, b, hooks)
}
