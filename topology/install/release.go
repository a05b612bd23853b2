package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/postrender"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/multikueue-testkit/testkit/topology"
)

// Release is a Helm release this package installed or upgraded on a cluster.
type Release struct {
	// Name and Namespace of the Helm release (its history lives in Secrets
	// there, Helm's default storage).
	Name      string
	Namespace string
	// Cluster is the cluster's name in the topology.
	Cluster string
	// Chart is "<name>-<version>", for example "kueue-0.17.0".
	Chart string
	// Revision is the Helm revision: 1 after an install, more after upgrades.
	Revision int
	// Upgraded is true when a release already existed and was upgraded.
	Upgraded bool
	// Objects are the release's objects as rendered (CRDs from a chart's
	// crds/ directory are not part of a release).
	Objects []*unstructured.Unstructured

	cluster  *topology.Cluster
	progress io.Writer
	timeout  time.Duration
}

func (r *Release) String() string {
	return fmt.Sprintf("release %s/%s (%s, revision %d) on cluster %q", r.Namespace, r.Name, r.Chart, r.Revision, r.Cluster)
}

// Uninstall removes the release and waits until its objects are gone. For
// Kueue this deletes Kueue's CRDs, which the chart keeps in templates/, and
// with them every Kueue object on the cluster (ClusterQueues, Workloads,
// MultiKueueClusters...). The namespace stays. A release already gone is not
// an error.
func (r *Release) Uninstall(ctx context.Context) error {
	return Uninstall(ctx, r.cluster, r.Name, r.Namespace, UninstallOptions{Timeout: r.timeout, Progress: r.progress})
}

// UninstallOptions tune Uninstall.
type UninstallOptions struct {
	// Timeout bounds the wait for the release's objects to be deleted;
	// default 5 minutes.
	Timeout time.Duration
	// Progress receives one line per step; nil discards.
	Progress io.Writer
}

// DefaultTimeout bounds a Helm operation and each readiness wait.
const DefaultTimeout = 5 * time.Minute

// Uninstall removes the Helm release name in namespace from cluster, like
// `helm uninstall --wait`. A release that does not exist is not an error, so
// Close paths may call it more than once. See Release.Uninstall for what goes
// with it.
func Uninstall(ctx context.Context, cluster *topology.Cluster, name, namespace string, opts UninstallOptions) error {
	if err := checkCluster(cluster); err != nil {
		return err
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	progress := progressTo(opts.Progress)
	cfg, err := helmConfig(cluster, namespace)
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "install: cluster %q: uninstalling release %s/%s\n", cluster.Name, namespace, name)
	un := action.NewUninstall(cfg)
	un.Wait = true
	un.Timeout = opts.Timeout
	un.IgnoreNotFound = true
	if err := runCtx(ctx, func() error { _, err := un.Run(name); return err }); err != nil {
		return fmt.Errorf("install: cluster %q: uninstalling release %s/%s: %w", cluster.Name, namespace, name, err)
	}
	fmt.Fprintf(progress, "install: cluster %q: release %s/%s uninstalled\n", cluster.Name, namespace, name)
	return nil
}

// releaseRequest is one install-or-upgrade.
type releaseRequest struct {
	cluster       *topology.Cluster
	chart         *loadedChart
	name          string
	namespace     string
	values        map[string]any
	takeOwnership bool
	timeout       time.Duration
	progress      io.Writer
	postRenderer  postrender.PostRenderer // nil: the manifest as rendered
}

// installOrUpgrade installs the release when the cluster has none of that
// name (or only an uninstalled one) and upgrades it otherwise, so that
// calling it twice is harmless. It does not use Helm's own wait: callers wait
// for what their component needs.
func installOrUpgrade(ctx context.Context, req releaseRequest) (*Release, error) {
	c, ch := req.cluster, req.chart.chart
	where := fmt.Sprintf("install: cluster %q: release %s/%s (chart %s-%s)", c.Name, req.namespace, req.name, ch.Name(), ch.Metadata.Version)
	cfg, err := helmConfig(c, req.namespace)
	if err != nil {
		return nil, err
	}
	hist := action.NewHistory(cfg)
	hist.Max = 1
	var last *release.Release
	var rels []*release.Release
	if err := runCtx(ctx, func() error { var err error; rels, err = hist.Run(req.name); return err }); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, fmt.Errorf("%s: reading the release history: %w", where, err)
	}
	for _, r := range rels {
		if last == nil || r.Version > last.Version {
			last = r
		}
	}
	var rel *release.Release
	switch {
	case last != nil && last.Info.Status.IsPending():
		return nil, fmt.Errorf("%s: revision %d is %s (an interrupted operation); uninstall it (install.Uninstall) or roll it back with helm before installing again", where, last.Version, last.Info.Status)
	case last == nil || last.Info.Status == release.StatusUninstalled:
		fmt.Fprintf(req.progress, "%s: helm install\n", where)
		in := action.NewInstall(cfg)
		in.ReleaseName = req.name
		in.Namespace = req.namespace
		in.CreateNamespace = true
		in.Replace = last != nil
		in.TakeOwnership = req.takeOwnership
		in.PostRenderer = req.postRenderer
		in.Timeout = req.timeout
		rel, err = in.RunWithContext(ctx, ch, req.values)
	default:
		fmt.Fprintf(req.progress, "%s: helm upgrade from revision %d (%s)\n", where, last.Version, last.Info.Status)
		up := action.NewUpgrade(cfg)
		up.Namespace = req.namespace
		up.TakeOwnership = req.takeOwnership
		up.PostRenderer = req.postRenderer
		up.Timeout = req.timeout
		rel, err = up.RunWithContext(ctx, req.name, ch, req.values)
	}
	if err != nil {
		hint := ""
		if !req.takeOwnership && isOwnershipConflict(err) {
			hint = " (objects of this chart exist without this release's ownership: remove them, or set TakeOwnership to adopt them)"
		}
		return nil, fmt.Errorf("%s: %w%s", where, err, hint)
	}
	objs, err := decodeManifest(rel.Manifest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	fmt.Fprintf(req.progress, "%s: revision %d %s, %d objects\n", where, rel.Version, rel.Info.Status, len(objs))
	return &Release{
		Name: rel.Name, Namespace: rel.Namespace, Cluster: c.Name,
		Chart:    ch.Name() + "-" + ch.Metadata.Version,
		Revision: rel.Version, Upgraded: last != nil && last.Info.Status != release.StatusUninstalled,
		Objects: objs,
		cluster: c, progress: req.progress, timeout: req.timeout,
	}, nil
}

// isOwnershipConflict tells Helm's "exists and cannot be imported into the
// current release" error.
func isOwnershipConflict(err error) bool {
	return err != nil && containsAny(err.Error(), "cannot be imported into the current release", "invalid ownership metadata")
}

// helmConfig is Helm's action configuration for namespace on cluster, with
// releases stored in Secrets (Helm's default).
func helmConfig(c *topology.Cluster, namespace string) (*action.Configuration, error) {
	getter := newRESTGetter(c.Config, namespace)
	cfg := &action.Configuration{}
	if err := cfg.Init(getter, namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("install: cluster %q: Helm configuration: %w", c.Name, err)
	}
	if kc, ok := cfg.KubeClient.(*kube.Client); ok {
		kc.Namespace = namespace
	}
	return cfg, nil
}

// runCtx runs a Helm call that takes no context and returns when it ends or
// ctx does (the call then finishes in the background, bounded by its own
// timeout, as Helm's RunWithContext does).
func runCtx(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func checkCluster(c *topology.Cluster) error {
	if c == nil {
		return errors.New("install: cluster is nil")
	}
	if c.Config == nil {
		return fmt.Errorf("install: cluster %q: Config is nil; the Helm client is built from it", c.Name)
	}
	return nil
}

func progressTo(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
