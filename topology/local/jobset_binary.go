package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology"
)

// JobSet's controller runs as its binary
// (sigs.k8s.io/jobset's main, at the version the Kueue under test requires
// in its go.mod, as Kueue's e2e tests install it), on every cluster with
// the JobSet integration, with every webhook its manifests register
// (defaulting and validation of JobSets, its pod webhooks): what its chart
// deploys, on loopback. On the manager its controller leaves MultiKueue's
// JobSets (spec.managedBy) alone.

// jobSetWebhookPrefix prefixes JobSet's webhook configuration names, next to
// Kueue's "kueue-" ones; its webhook paths equal Kueue's JobSet webhook
// paths, so it has a server and port of its own.
const jobSetWebhookPrefix = "jobset-"

// ensureJobSet finds or builds the JobSet controller binary at the version
// the Kueue binary bin requires in its go.mod.
func ensureJobSet(ctx context.Context, ao assets.Options, bin assets.Kueue) (assets.Operator, error) {
	return ensureOperator(ctx, ao, bin, assets.JobSetOperator())
}

// ensureOperator finds or builds the operator binary of spec at the version
// the Kueue binary bin requires in its go.mod.
func ensureOperator(ctx context.Context, ao assets.Options, bin assets.Kueue, spec assets.OperatorSpec) (assets.Operator, error) {
	v, err := bin.RequiredVersion(spec.Module)
	if err != nil {
		return assets.Operator{}, err
	}
	op, err := assets.EnsureOperator(ctx, ao, spec, v)
	if err != nil {
		return assets.Operator{}, fmt.Errorf("local: %w", err)
	}
	return op, nil
}

// startServingWebhooks starts b, a controller binary that serves webhooks,
// and registers those of hooks it serves on cluster c.
func (lc *localCluster) startServingWebhooks(ctx context.Context, c *topology.Cluster, b *controllerBinary, hooks webhookConfigs) error {
	lc.mu.Lock()
	lc.binaries = append(lc.binaries, b)
	lc.mu.Unlock()
	if err := b.start(ctx); err != nil {
		return err
	}
	served, err := b.servedPaths(ctx, hooks.paths())
	if err != nil {
		return err
	}
	return registerWebhooks(ctx, c, hooks, served, b.webhookPort, lc.cp.ca.certPEM)
}

// startJobSetBinary starts cluster c's JobSet controller binary and
// registers the webhooks it serves.
func (lc *localCluster) startJobSetBinary(ctx context.Context, c *topology.Cluster, js assets.Operator, hooks webhookConfigs, o Options) error {
	b := &controllerBinary{name: "jobset", cluster: lc.name, path: js.Path, version: js.Version,
		dir: filepath.Join(lc.cp.dir, "jobset"), timeout: o.StartTimeout}
	if err := b.allocate(lc.cp); err != nil {
		return err
	}
	if err := b.writeServingCert(lc.cp, "webhook-certs", "metrics-certs"); err != nil {
		return fmt.Errorf("cluster %q: JobSet's certificates: %w", lc.name, err)
	}
	cfg := filepath.Join(b.dir, "config.yaml")
	b.configure = func() error {
		m := map[string]any{"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration"}
		setLoopbackServing(m, *b, filepath.Join(b.dir, "webhook-certs"))
		section(m, "metrics")["certDir"] = filepath.Join(b.dir, "metrics-certs")
		raw, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		return os.WriteFile(cfg, raw, 0o600)
	}
	kubeconfig := filepath.Join(b.dir, "jobset.kubeconfig")
	if err := lc.cp.writeClientKubeconfig(kubeconfig, jobsetUser, lc.cp.jobset); err != nil {
		return err
	}
	b.args = []string{"--config=" + cfg, "--kubeconfig=" + kubeconfig}
	return lc.startServingWebhooks(ctx, c, b, hooks)
}
