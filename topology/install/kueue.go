package install

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"golang.org/x/mod/semver"
	"helm.sh/helm/v3/pkg/postrender"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	componentconfig "k8s.io/component-base/config/v1alpha1"
	"k8s.io/utils/ptr"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/multikueue-testkit/testkit/topology"
)

// KueueOptions say what Kueue to install and how.
type KueueOptions struct {
	// Spec is the topology's resolved Spec (topology.Options.Resolve, or
	// Topology.Spec). Kueue's namespace (also the release namespace),
	// integrations, MultiKueue settings and feature gates come from
	// Spec.KueueConfiguration, the configuration the local topology runs
	// in-process. Required.
	Spec topology.Spec
	// Needs are the connector's (topology.Connector.KueueNeeds): feature
	// gates, ClusterProfile credentials providers, and the ClusterProfile
	// CRD, which Kueue() applies before Kueue starts.
	Needs topology.KueueNeeds
	// ReleaseName names the Helm release and prefixes every object of the
	// chart (the chart's fullname): <name>-controller-manager,
	// <name>-webhook-service... Default "kueue", which gives the names of
	// Kueue's own manifests.
	ReleaseName string
	// Image is the controller image. Default: the released image of the
	// pinned Kueue, registry.k8s.io/kueue/kueue:<module version>, pulled
	// IfNotPresent (the chart's own default is a staging image pulled
	// Always).
	Image Image
	// Replicas of the controller manager; default 1. With more, leader
	// election picks the one that runs the controllers.
	Replicas int
	// LeaderElection, when set, replaces the chart's leaderElection section
	// (Kueue's own configuration type): with Replicas > 1, LeaseDuration,
	// RenewDeadline and RetryPeriod decide how fast a standby replica takes
	// over. Unset fields keep Kueue's defaults (leaderElect true, the Lease
	// c1f6bfd2.kueue.x-k8s.io); the chart's own durations are 15s, 10s, 2s.
	LeaderElection *componentconfig.LeaderElectionConfiguration
	// Version installs that Kueue release ("v0.18.4"): its chart from the
	// release's module source (fetched from the Go module proxy when not in
	// the module cache) and, unless Image says otherwise, its released
	// image. Default: the Kueue module this library is built with. The
	// installed version is what Topology.Facts.Version reads back (the
	// Deployment image's tag).
	Version string
	// Chart is the chart to install instead of charts/kueue of the Kueue
	// module (of Version, else the pinned one): a directory, or an OCI
	// reference "oci://host/path/kueue:0.19.2" pulled with Helm's registry
	// client (the credentials `helm registry login` stored; see
	// ChartPlainHTTP). The image tag then defaults to the chart's appVersion.
	Chart string
	// ChartPlainHTTP pulls an OCI Chart over plain HTTP (helm's --plain-http),
	// for a registry without TLS.
	ChartPlainHTTP bool
	// Values are merged over the values computed here, key by key, and win
	// (for nodeSelector, tolerations, imagePullSecrets, resources,
	// enableCertManager...). They may not set managerConfig (built from
	// Spec) nor fullnameOverride (set to ReleaseName).
	Values map[string]any
	// CredentialsPlugin, when set, puts the ClusterProfile credentials
	// plugin into Kueue's pod at the path of Needs' credentials provider
	// (see CredentialsPlugin). Needed on a real manager with the
	// ClusterProfile connector; the local topology runs the plugin from
	// the host.
	CredentialsPlugin *CredentialsPlugin
	// TakeOwnership lets Helm adopt objects of the chart that exist without
	// this release's ownership (a Kueue applied with kubectl). Uninstall then
	// deletes them.
	TakeOwnership bool
	// Timeout bounds the Helm operation and each readiness wait; default
	// DefaultTimeout.
	Timeout time.Duration
	// Progress receives one line per step; nil discards.
	Progress io.Writer
}

// Image is a container image reference.
type Image struct {
	Repository string
	Tag        string
	// PullPolicy defaults to IfNotPresent.
	PullPolicy string
}

// Released image repositories.
const (
	KueueImage  = "registry.k8s.io/kueue/kueue"
	JobSetImage = "registry.k8s.io/jobset/jobset"
)

const defaultKueueRelease = "kueue"

// KueueRender is a Kueue installation rendered offline.
type KueueRender struct {
	// Manifest is the chart's rendered manifest, as `helm template` prints it.
	Manifest string
	// Objects are the manifest's objects, in its order.
	Objects []*unstructured.Unstructured
	// Values are the chart values used.
	Values map[string]any
	// Config is the Kueue Configuration the manager's ConfigMap carries
	// (read back, no defaults applied); FeatureGates holds the gates passed
	// with --feature-gates instead (Kueue refuses both).
	Config configapi.Configuration
	// FeatureGates are the gates on the command line.
	FeatureGates map[string]bool
	// Chart is "<name>-<version>".
	Chart string
}

// kueuePlan is everything computed from KueueOptions before talking to a
// cluster.
type kueuePlan struct {
	opts    KueueOptions
	chart   *loadedChart
	name    string
	ns      string
	values  map[string]any
	config  *managerConfig
	plugin  *pluginInjection // nil without a CredentialsPlugin
	timeout time.Duration
}

func planKueue(ctx context.Context, opts KueueOptions) (*kueuePlan, error) {
	ns := opts.Spec.Kueue.Namespace
	if ns == "" || len(opts.Spec.Kueue.Integrations) == 0 {
		return nil, fmt.Errorf("install: KueueOptions.Spec: not resolved (no Kueue namespace or integrations); pass topology.Options.Resolve()'s result or Topology.Spec")
	}
	name := cmp.Or(opts.ReleaseName, defaultKueueRelease)
	// The longest Service name the chart makes must be a DNS-1035 label.
	if errs := validation.IsDNS1035Label(name + "-controller-manager-metrics-service"); len(errs) > 0 {
		return nil, fmt.Errorf("install: KueueOptions.ReleaseName: %q: the chart's Service %q would be invalid: %s", name, name+"-controller-manager-metrics-service", errs[0])
	}
	if opts.Replicas < 0 {
		return nil, fmt.Errorf("install: KueueOptions.Replicas: %d is negative", opts.Replicas)
	}
	for _, k := range []string{"managerConfig", "fullnameOverride"} {
		if _, ok := opts.Values[k]; ok {
			return nil, fmt.Errorf("install: KueueOptions.Values[%q]: set by this package (the manager configuration comes from Spec, the fullname is ReleaseName)", k)
		}
	}
	if opts.Version != "" && !semver.IsValid(opts.Version) {
		return nil, fmt.Errorf("install: KueueOptions.Version: %q is not a release like v0.19.2", opts.Version)
	}
	ch, err := kueueChart().loadVersion(ctx, chartRef{opts.Chart, opts.ChartPlainHTTP}, opts.Version)
	if err != nil {
		return nil, err
	}
	cfg := opts.Spec.KueueConfiguration(opts.Needs)
	if le := opts.LeaderElection; le != nil {
		if le.LeaseDuration.Duration < 0 || le.RenewDeadline.Duration < 0 || le.RetryPeriod.Duration < 0 {
			return nil, fmt.Errorf("install: KueueOptions.LeaderElection: durations may not be negative")
		}
		cfg.LeaderElection = le.DeepCopy()
		cfg.LeaderElection.LeaderElect = cmp.Or(le.LeaderElect, ptr.To(true))
		cfg.LeaderElection.ResourceName = cmp.Or(le.ResourceName, configapi.DefaultLeaderElectionID)
	}
	mc, err := buildManagerConfig(ch.chart, cfg, name)
	if err != nil {
		return nil, err
	}
	img := opts.Image
	img.Repository = cmp.Or(img.Repository, KueueImage)
	img.Tag = cmp.Or(img.Tag, ch.moduleVersion, ch.chart.Metadata.AppVersion)
	img.PullPolicy = cmp.Or(img.PullPolicy, "IfNotPresent")
	gates := make([]any, 0, len(mc.featureGates))
	for _, g := range mc.featureGates {
		gates = append(gates, map[string]any{"name": g.Name, "enabled": g.Enabled})
	}
	values := map[string]any{
		"fullnameOverride": name,
		"controllerManager": map[string]any{
			"replicas":     int64(cmp.Or(opts.Replicas, 1)),
			"featureGates": gates,
			"manager": map[string]any{
				"image": map[string]any{"repository": img.Repository, "tag": img.Tag, "pullPolicy": img.PullPolicy},
			},
		},
		"managerConfig": map[string]any{"controllerManagerConfigYaml": mc.yaml},
	}
	mergeValues(values, opts.Values)
	plugin, err := planPlugin(opts.CredentialsPlugin, opts.Needs, name)
	if err != nil {
		return nil, err
	}
	return &kueuePlan{opts: opts, chart: ch, name: name, ns: ns, values: values, config: mc, plugin: plugin, timeout: cmp.Or(opts.Timeout, DefaultTimeout)}, nil
}

// postRenderer is what Helm runs over the rendered manifest: nil, or the
// credentials plugin's injection.
func (p *kueuePlan) postRenderer() postrender.PostRenderer {
	if p.plugin == nil {
		return nil
	}
	return p.plugin
}

// mergeValues merges over into dst: maps key by key, anything else replaced.
func mergeValues(dst, over map[string]any) {
	for k, v := range over {
		if om, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, om)
				continue
			}
		}
		dst[k] = v
	}
}

// RenderKueue renders the Kueue chart offline, exactly as Kueue() would
// install it, without a cluster. The ClusterProfile CRD that Needs may ask
// for is not part of the chart and not rendered.
func RenderKueue(ctx context.Context, opts KueueOptions) (*KueueRender, error) {
	p, err := planKueue(ctx, opts)
	if err != nil {
		return nil, err
	}
	manifest, err := render(p.chart.chart, p.name, p.ns, p.values, false, p.postRenderer())
	if err != nil {
		return nil, err
	}
	objs, err := decodeManifest(manifest)
	if err != nil {
		return nil, err
	}
	r := &KueueRender{Manifest: manifest, Objects: objs, Values: p.values, Config: p.config.parsed, Chart: p.chart.chart.Name() + "-" + p.chart.chart.Metadata.Version}
	if len(p.config.featureGates) > 0 {
		r.FeatureGates = map[string]bool{}
		for _, g := range p.config.featureGates {
			r.FeatureGates[g.Name] = g.Enabled
		}
	}
	return r, nil
}

// Kueue installs Kueue on cluster with Helm from the chart of the pinned
// Kueue module, or upgrades the release when it exists (calling it again is
// harmless), then waits, as Kueue's own e2e tests do, until Kueue serves:
//
//  1. the ClusterProfile CRD first, when Needs asks for it (Kueue sets up its
//     ClusterProfile controller only if the CRD exists when it starts);
//  2. the controller Deployment is Available with every replica updated;
//  3. the webhook Service has a ready endpoint;
//  4. the leader-election Lease (c1f6bfd2.kueue.x-k8s.io in Kueue's
//     namespace, or the configured name) has a holder.
//
// Not awaited: the CA bundle injection into the webhook configurations,
// which Kueue's certificate manager does a moment later; make the first
// writes with RetryWebhook or CreateThroughWebhooks. Errors name the cluster
// and the object awaited; once Helm has run, the Release comes back with the
// error, so that the caller can uninstall it.
func Kueue(ctx context.Context, cluster *topology.Cluster, opts KueueOptions) (*Release, error) {
	if err := checkCluster(cluster); err != nil {
		return nil, err
	}
	start := time.Now()
	p, err := planKueue(ctx, opts)
	if err != nil {
		return nil, err
	}
	progress := progressTo(opts.Progress)
	fmt.Fprintf(progress, "install: cluster %q: Kueue from chart %s, image %s\n", cluster.Name, p.chart, imageOf(p.values))
	cl, err := readyClient(cluster)
	if err != nil {
		return nil, err
	}
	w := &waiter{cluster: cluster, client: cl, timeout: p.timeout, progress: progress}
	if opts.Needs.ClusterProfileCRD {
		if err := applyClusterProfileCRD(ctx, w); err != nil {
			return nil, err
		}
	}
	rel, err := installOrUpgrade(ctx, releaseRequest{
		cluster: cluster, chart: p.chart, name: p.name, namespace: p.ns, values: p.values,
		takeOwnership: opts.TakeOwnership, timeout: p.timeout, progress: progress, postRenderer: p.postRenderer(),
	})
	if err != nil {
		return nil, err
	}
	if err := w.workloadsReady(ctx, rel); err != nil {
		return rel, err
	}
	if le := p.config.parsed.LeaderElection; le != nil && le.LeaderElect != nil && *le.LeaderElect {
		if err := w.leaseHeld(ctx, p.ns, cmp.Or(le.ResourceName, configapi.DefaultLeaderElectionID)); err != nil {
			return rel, err
		}
	}
	fmt.Fprintf(progress, "install: cluster %q: Kueue ready in %s (%s)\n", cluster.Name, time.Since(start).Round(100*time.Millisecond), rel)
	return rel, nil
}

func imageOf(values map[string]any) string {
	cm, _ := values["controllerManager"].(map[string]any)
	m, _ := cm["manager"].(map[string]any)
	img, _ := m["image"].(map[string]any)
	return fmt.Sprintf("%v:%v (%v)", img["repository"], img["tag"], img["pullPolicy"])
}
