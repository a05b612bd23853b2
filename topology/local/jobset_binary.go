package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
	return lc.startConfigured(ctx, c, js, "config.jobset.x-k8s.io/v1alpha1", true, hooks, jobsetUser, lc.cp.jobset, o)
}

// startConfigured starts cluster c's controller binary op, one configured
// by a file in the shape of Kueue's (JobSet's, the LeaderWorkerSet
// controller's): apiVersion is its Configuration's; it serves on loopback
// ports with a certificate of the cluster's CA (its metrics server too
// with metricsCerts), leader election and internal certificates off. It
// runs as user with the client identity id, and the webhooks of hooks it
// serves are registered.
func (lc *localCluster) startConfigured(ctx context.Context, c *topology.Cluster, op assets.Operator, apiVersion string, metricsCerts bool,
	hooks webhookConfigs, user string, id keyPair, o Options) error {
	certDirs := []string{"webhook-certs"}
	if metricsCerts {
		certDirs = append(certDirs, "metrics-certs")
	}
	return lc.startWithConfigFile(ctx, c, op, certDirs, nil, false, func(b *controllerBinary) map[string]any {
		m := map[string]any{"apiVersion": apiVersion, "kind": "Configuration"}
		setLoopbackServing(m, *b, filepath.Join(b.dir, "webhook-certs"))
		if metricsCerts {
			section(m, "metrics")["certDir"] = filepath.Join(b.dir, "metrics-certs")
		}
		return m
	}, hooks, user, id, o)
}

// startWithConfigFile starts cluster c's controller binary op with
// --config (the file config makes, written again whenever its ports
// change) and --kubeconfig (user's, with the client identity id): a
// certificate of the cluster's CA in each of certDirs (below its working
// directory), env added to its environment; the webhooks of hooks it serves
// are registered (with lateWebhooks, once it serves them all:
// controllerBinary.lateWebhooks).
func (lc *localCluster) startWithConfigFile(ctx context.Context, c *topology.Cluster, op assets.Operator, certDirs, env []string, lateWebhooks bool,
	config func(*controllerBinary) map[string]any, hooks webhookConfigs, user string, id keyPair, o Options) error {
	b := &controllerBinary{name: op.Name, cluster: lc.name, path: op.Path, version: op.Version,
		dir: filepath.Join(lc.cp.dir, op.Name), timeout: o.StartTimeout, lateWebhooks: lateWebhooks}
	for _, e := range env {
		b.env = append(b.env, strings.ReplaceAll(e, "$DIR", b.dir))
	}
	if err := b.allocate(lc.cp); err != nil {
		return err
	}
	if err := b.writeServingCert(lc.cp, certDirs...); err != nil {
		return fmt.Errorf("cluster %q: %s's certificates: %w", lc.name, op.Name, err)
	}
	cfg := filepath.Join(b.dir, "config.yaml")
	b.configure = func() error {
		raw, err := yaml.Marshal(config(b))
		if err != nil {
			return err
		}
		return os.WriteFile(cfg, raw, 0o600)
	}
	kubeconfig := filepath.Join(b.dir, op.Name+".kubeconfig")
	if err := lc.cp.writeClientKubeconfig(kubeconfig, user, id); err != nil {
		return err
	}
	b.args = []string{"--config=" + cfg, "--kubeconfig=" + kubeconfig}
	return lc.startServingWebhooks(ctx, c, b, hooks)
}
