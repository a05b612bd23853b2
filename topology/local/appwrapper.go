package local

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology"
)

// The AppWrapper controller (workload.codeflare.dev/v1beta2) runs as a
// binary built from github.com/project-codeflare/appwrapper at the version
// the Kueue under test requires in its go.mod (v1.2.2 for v0.19.2), on every
// worker of a topology with the AppWrapper integration: upstream's
// controllers and webhooks (pkg/controller) with upstream's default
// configuration, under a main of this library's (internal/assets/mains),
// because upstream's serves its webhooks on the fixed port 9443 behind a
// cert rotator that waits for a Secret volume and reads its configuration
// from a ConfigMap in its own namespace. Its CRD and webhook registrations
// come from the same module (config/crd/bases, config/webhook). The
// manager's AppWrappers are MultiKueue's (spec.managedBy), which the
// controller leaves alone; the manager runs none. The controller creates the
// wrapped Job, which the Job controller runs and KWOK's pods end.

// appWrapperWebhooks is the AppWrapper's webhook manifest in its module, and
// appWrapperWebhookPrefix prefixes its registrations' names.
const (
	appWrapperWebhooks      = "config/webhook/manifests.yaml"
	appWrapperWebhookPrefix = "appwrapper-"
)

// startAppWrapper starts worker lc's AppWrapper controller and registers the
// webhooks it serves.
func (lc *localCluster) startAppWrapper(ctx context.Context, c *topology.Cluster, op assets.Operator, hooks webhookConfigs, o Options) error {
	b := &controllerBinary{name: "appwrapper", cluster: lc.name, path: op.Path, version: op.Version,
		dir: filepath.Join(lc.cp.dir, "appwrapper"), timeout: o.StartTimeout}
	if err := b.allocate(lc.cp); err != nil {
		return err
	}
	if err := b.writeServingCert(lc.cp, "webhook-certs"); err != nil {
		return fmt.Errorf("cluster %q: the AppWrapper controller's certificate: %w", lc.name, err)
	}
	kubeconfig := filepath.Join(b.dir, "appwrapper.kubeconfig")
	if err := lc.cp.writeClientKubeconfig(kubeconfig, appWrapperUser, lc.cp.appWrapper); err != nil {
		return err
	}
	b.configure = func() error {
		b.args = []string{
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", b.metricsPort),
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", b.healthPort),
			fmt.Sprintf("--webhook-server-port=%d", b.webhookPort),
			"--webhook-cert-dir=" + filepath.Join(b.dir, "webhook-certs"),
		}
		return nil
	}
	b.env = []string{"KUBECONFIG=" + kubeconfig}
	return lc.startServingWebhooks(ctx, c, b, hooks)
}
