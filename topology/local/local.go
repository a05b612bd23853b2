// Package local is the embedded topology provider: every cluster is a real
// etcd, kube-apiserver and kube-controller-manager process on loopback with
// Kueue as its real binary (v0.19.2 unless Options.Kueue chooses another),
// one process per cluster. It needs no Docker, no root and no network beyond the Go module
// proxy (and not even that once the binaries are cached).
//
//	topo, err := local.New(ctx, topology.Options{Workers: 3}, local.Options{})
//	if err != nil { ... }
//	defer topo.Close(ctx)
//
// Every worker also runs kube-scheduler and a KWOK controller over fake
// Nodes (one by default, holding the worker's quota), so Jobs run in pods
// as on a cluster: the Job controller creates them, the scheduler binds
// them, KWOK runs them. Options.Nodes sizes them; a worker's Nodes can
// start at zero and grow (Nodes.Autoscaler):
//
//	local.Options{Nodes: &local.Nodes{Count: 2}}
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology"
)

// Options tune the local provider. The zero value is the default.
type Options struct {
	// Assets chooses where kube-apiserver and etcd come from
	// (KUBEBUILDER_ASSETS, then the cache, then a build).
	Assets AssetOptions
	// APIServerArgs are appended to every kube-apiserver command line.
	APIServerArgs []string
	// StartTimeout bounds each start step (a process becoming healthy, CRDs
	// becoming Established and served, Kueue becoming ready, also when
	// Cluster.Lifecycle starts it again). Default 2 minutes.
	StartTimeout time.Duration
	// Sequential starts the clusters one after another instead of in
	// parallel (for comparison benchmarks).
	Sequential bool
	// ClusterProfileCRD installs the ClusterProfile CRD on the manager even
	// when the connector does not ask for it.
	ClusterProfileCRD bool
	// ServeKueueV1beta1 serves Kueue's CRDs at v1beta1 as well as at their
	// storage version v1beta2. Off by default: there is no conversion webhook
	// here (conversion None, so v1beta1 reads drop or misplace every field
	// that changed between the versions), and the second version costs each
	// API server about a quarter of its start-up CPU. Turn it on only for
	// code that lists kueue.x-k8s.io/v1beta1 objects.
	ServeKueueV1beta1 bool
	// APIServerEnv is added to every kube-apiserver's environment, after the
	// provider's own (GOMAXPROCS = half the CPUs; GOMEMLIMIT from
	// BigTopologyWorkers workers on), so its entries win: e.g.
	// GOMEMLIMIT=256MiB on a small topology, GOMEMLIMIT=off on a big one
	// (docs/performance.md, "Start-up levers").
	APIServerEnv []string
	// Etcd chooses one etcd per cluster or one for the topology (EtcdMode).
	// Default EtcdAuto: shared from BigTopologyWorkers workers on.
	Etcd EtcdMode
	// KueueLogVerbosity is the klog-style V level of each cluster's
	// kueue.log (Kueue logs most decisions at 2 to 5). Default 0.
	KueueLogVerbosity int
	// KeepDir keeps the topology's directory (logs, certificates, etcd data)
	// after Close, for debugging; its path is printed to Progress. Also set
	// by MKTK_KEEP_DIR=1. Processes are stopped either way.
	KeepDir bool
	// Nodes are every worker's KWOK Nodes (see Nodes): pods are created by
	// the Job controller, bound by kube-scheduler and run by a KWOK
	// controller. Nil: $MKTK_NODES decides (NodesFromEnv), else one Node
	// per worker holding its quota.
	Nodes *Nodes
	// WorkerNodes gives single workers, by name, Nodes of their own (an
	// autoscaled pool at zero, say), in place of Nodes; the workers it does
	// not name get Nodes.
	WorkerNodes map[string]Nodes
	// DisableAudit turns off the API servers' audit logs; failure timelines
	// then do not say who made each change. Audit costs little (see the
	// docs/performance.md).
	DisableAudit bool
	// HA runs the manager's and/or the workers' Kueue as several replicas
	// with leader election, webhooks and the visibility API on every replica
	// (see HA and Provider.Replicas). Zero: $MKTK_HA decides (HAFromEnv),
	// else one Kueue per cluster.
	HA HA
	// Kueue chooses the Kueue under test, run as its real binary, one
	// process per cluster: a release built from the Go module proxy
	// (KueueOptions.Version, e.g. DefaultKueueVersion), a checkout, or a
	// prebuilt binary (KueueOptions, or $MKTK_KUEUE_VERSION,
	// $MKTK_KUEUE_SOURCE, $MKTK_KUEUE_BINARY). Its configuration is the one
	// that version's chart installs for the Spec; its CRDs and webhook
	// registrations come from the same source tree. With none of those set
	// it is DefaultKueueVersion.
	Kueue KueueOptions
	// Logger receives what this process logs through controller-runtime's
	// process-global logger (its clients; Kueue, the operators and the
	// agent log to files in each cluster's directory); nil installs a
	// discarding logger unless the process already installed one.
	Logger *logr.Logger
}

// AssetOptions choose the kube-apiserver and etcd binaries. The zero value
// looks in $KUBEBUILDER_ASSETS, then in the cache, and builds them from the
// Go module proxy if neither has them (see cmd/mktk).
type AssetOptions struct {
	// KubernetesVersion of kube-apiserver; default DefaultKubernetesVersion.
	KubernetesVersion string
	// EtcdVersion of etcd; default DefaultEtcdVersion.
	EtcdVersion string
	// CacheDir holds built binaries; default $MKTK_ASSETS_DIR, else
	// <user cache dir>/multikueue-testkit/assets.
	CacheDir string
	// NoBuild makes missing binaries an error instead of building them.
	NoBuild bool
	// Progress receives one line per build step; default os.Stderr (a build
	// is rare and takes minutes: it says so where a person sees it).
	Progress io.Writer
}

// KueueOptions choose the Kueue binary (Options.Kueue). At most one of
// Source and Binary.
type KueueOptions struct {
	// Version of sigs.k8s.io/kueue to build from the Go module proxy (and
	// cache), e.g. "v0.18.4"; default $MKTK_KUEUE_VERSION, else
	// DefaultKueueVersion. With Binary, the version that binary is, when
	// its build info does not say.
	Version string
	// Source is a Kueue checkout to build cmd/kueue from (every start
	// builds it; Go's build cache makes an unchanged tree quick); default
	// $MKTK_KUEUE_SOURCE.
	Source string
	// Binary is a prebuilt kueue binary; default $MKTK_KUEUE_BINARY. Built
	// without this library's two path patches (assets: KueuePatches), it
	// needs /visibility and /etc/kueue/metrics/certs.
	Binary string
}

// DefaultKueueVersion is the Kueue a binary topology builds by default: the
// newest release the module proxy serves.
const DefaultKueueVersion = assets.DefaultKueueVersion

func (k KueueOptions) internal() assets.KueueOptions {
	return assets.KueueOptions{Version: k.Version, Source: k.Source, Binary: k.Binary}
}

// Default binary versions: kube-apiserver of the Kubernetes minor Kueue
// v0.19.2 is built against, and the etcd that release pins.
const (
	DefaultKubernetesVersion = assets.DefaultKubernetesVersion
	DefaultEtcdVersion       = assets.DefaultEtcdVersion
)

func (a AssetOptions) internal() assets.Options {
	o := assets.Options{KubernetesVersion: a.KubernetesVersion, EtcdVersion: a.EtcdVersion, CacheDir: a.CacheDir, NoBuild: a.NoBuild, Progress: a.Progress}
	if o.Progress == nil {
		o.Progress = os.Stderr
	}
	return o
}

// installLogger sets controller-runtime's global logger, which Kueue's
// clients use, to Options.Logger when given (topology.New has already set a
// discarding one when none was set).
func installLogger(l *logr.Logger) {
	if l != nil {
		ctrllog.SetLogger(*l)
	}
}

// Memory of big topologies: from BigTopologyWorkers workers on, every
// kube-apiserver runs with GOMEMLIMIT=BigTopologyAPIServerMemoryLimit (a
// soft limit: the Go runtime collects harder as the heap nears it), and the
// clusters share one etcd (EtcdAuto); small topologies keep the runtime's
// default, where the limit costs more CPU than the memory it saves (the
// measurements: docs/performance.md, "Start-up levers"). Options.APIServerEnv
// overrides it (later entries win; GOMEMLIMIT=off lifts it).
const (
	BigTopologyWorkers              = 10
	BigTopologyAPIServerMemoryLimit = "224MiB"
)

// apiServerEnv is the environment added to every kube-apiserver of a
// topology with the given number of workers: the big-topology memory limit,
// then the caller's (Options.APIServerEnv).
func apiServerEnv(workers int, own []string) []string {
	var env []string
	if workers >= BigTopologyWorkers {
		env = append(env, "GOMEMLIMIT="+BigTopologyAPIServerMemoryLimit)
	}
	return append(env, own...)
}

// startTimeout is the default bound on one start step.
const startTimeout = 2 * time.Minute

// New starts a local topology: it provisions the clusters, connects the
// workers (with opts.Connector, else connect.Default as on every provider),
// creates the MultiKueue objects and waits until they are Active. It is
// topology.New(ctx, NewProvider(lopts), opts). Close the topology when
// done; topo.CloseWith(t) does it from t.Cleanup.
func New(ctx context.Context, opts topology.Options, lopts Options) (*topology.Topology, error) {
	return topology.New(ctx, NewProvider(lopts), opts)
}

// NewProvider returns the local provider, for topology.New: New is
// exactly topology.New(ctx, NewProvider(lopts), opts). Where Options.HA or
// Options.Nodes is unset it takes them from the environment (HAFromEnv,
// NodesFromEnv); an error there is Provision's.
func NewProvider(o Options) *Provider {
	if o.StartTimeout == 0 {
		o.StartTimeout = startTimeout
	}
	if !o.KeepDir {
		o.KeepDir = KeepDirFromEnv(os.Getenv)
	}
	o, err := haFromEnvUnlessSet(o)
	if err == nil && o.Nodes == nil {
		o.Nodes, err = NodesFromEnv(os.Getenv)
	}
	p := &Provider{opts: o}
	if err != nil {
		p.envErr = fmt.Errorf("local: %w", err)
	}
	return p
}

// EnvKeepDir, set to 1, keeps the topology's directory as Options.KeepDir.
const EnvKeepDir = "MKTK_KEEP_DIR"

// KeepDirFromEnv reads EnvKeepDir with getenv.
func KeepDirFromEnv(getenv func(string) string) bool { return getenv(EnvKeepDir) == "1" }

// DefaultConnector is connect.Default (topology.ConnectorDefaulter).
func (p *Provider) DefaultConnector() (topology.Connector, error) { return connect.Default() }

var _ topology.ConnectorDefaulter = (*Provider)(nil)

// Provider implements topology.Provider with local processes.
type Provider struct {
	opts Options
	// envErr is what NewProvider could not read from the environment,
	// returned by Provision.
	envErr error

	// auditPolicy is every API server's audit policy; nil with DisableAudit.
	auditPolicy []byte
	// apiEnv is every kube-apiserver's added environment (apiServerEnv),
	// set by Provision before any cluster starts.
	apiEnv []string
	// etcd is the topology's shared etcd (Options.Etcd), nil when every
	// cluster runs its own; set by Provision before any cluster starts.
	etcd *sharedEtcd
	// ports hands out every loopback port the topology listens on.
	ports portPool
	// nodes are the binaries and each worker's Nodes, set by Provision
	// before any cluster starts.
	nodes *nodeSetup

	mu       sync.Mutex
	root     string
	clusters []*localCluster
	closed   bool
}

// Name implements topology.Provider.
func (p *Provider) Name() string { return "local" }

// Provision implements topology.Provider.
func (p *Provider) Provision(ctx context.Context, spec topology.Spec) (*topology.Cluster, []*topology.Cluster, error) {
	if p.envErr != nil {
		return nil, nil, p.envErr
	}
	if spec.Connector == nil {
		return nil, nil, errors.New("local: Spec.Connector: nil (topology.New defaults it; a Spec handed to Provision directly must name one)")
	}
	installLogger(p.opts.Logger)
	for i, kv := range p.opts.APIServerEnv {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return nil, nil, fmt.Errorf("local: Options.APIServerEnv[%d] %q is not NAME=value", i, kv)
		}
	}
	if err := p.opts.Etcd.validate(); err != nil {
		return nil, nil, err
	}
	kueueProcs := p.opts.HA.replicas(topology.RoleManager) + len(spec.WorkerNames)*p.opts.HA.replicas(topology.RoleWorker)
	if err := checkInotify(inotifyNeeded(len(spec.WorkerNames), kueueProcs, true)); err != nil {
		return nil, nil, err
	}
	bins, err := assets.Ensure(ctx, p.opts.Assets.internal())
	if err != nil {
		return nil, nil, err
	}
	RemoveStaleDirs()
	root, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		return nil, nil, err
	}
	if err := markOwner(root); err != nil {
		os.RemoveAll(root)
		return nil, nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		os.RemoveAll(root)
		return nil, nil, errors.New("local: provider is closed")
	}
	p.root = root
	p.mu.Unlock()

	needs, err := spec.Connector.KueueNeeds(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("connector %s: %w", spec.Connector.Name(), err)
	}
	if err := p.opts.HA.validate(); err != nil {
		return nil, nil, err
	}
	if err := runnableIntegrations(spec.Kueue.Integrations); err != nil {
		return nil, nil, err
	}
	kb, err := p.prepareBinaryKueue(ctx, root, spec, needs)
	if err != nil {
		return nil, nil, err
	}
	roots := crdRoots{kueue: kb.bin.SourceDir}
	if slices.Contains(spec.Kueue.Integrations, topology.IntegrationJobSet) {
		if kb.jobSet, err = ensureJobSet(ctx, p.opts.Assets.internal(), kb.bin); err != nil {
			return nil, nil, err
		}
		roots.jobSet = kb.jobSet.SourceDir
	}
	if slices.ContainsFunc(spec.Kueue.Integrations, isRayIntegration) {
		if kb.kubeRay, err = ensureKubeRay(ctx, p.opts.Assets.internal(), kb.bin); err != nil {
			return nil, nil, err
		}
		roots.kubeRay = kb.kubeRay.SourceDir
	}
	kb.builtin = builtinControllers(spec.Kueue.Integrations)
	if kb.kubeflowSchemes = kubeflowSchemes(spec.Kueue.Integrations); len(kb.kubeflowSchemes) > 0 {
		if kb.trainingOperator, err = ensureTrainingOperator(ctx, p.opts.Assets.internal(), kb.bin); err != nil {
			return nil, nil, err
		}
		roots.trainingOperator = kb.trainingOperator.SourceDir
	}
	if slices.Contains(spec.Kueue.Integrations, topology.IntegrationMPIJob) {
		if kb.mpiOperator, err = ensureMPIOperator(ctx, p.opts.Assets.internal(), kb.bin); err != nil {
			return nil, nil, err
		}
		roots.mpiOperator = kb.mpiOperator.SourceDir
	}
	if slices.Contains(spec.Kueue.Integrations, topology.IntegrationAppWrapper) {
		if kb.appWrapper, err = ensureOperator(ctx, p.opts.Assets.internal(), kb.bin, assets.AppWrapperOperator()); err != nil {
			return nil, nil, err
		}
		roots.appWrapper = kb.appWrapper.SourceDir
	}
	if slices.Contains(spec.Kueue.Integrations, topology.IntegrationLeaderWorkerSet) {
		if kb.lws, err = ensureOperator(ctx, p.opts.Assets.internal(), kb.bin, assets.LWSOperator()); err != nil {
			return nil, nil, err
		}
		roots.lws = kb.lws.SourceDir
	}
	if slices.Contains(spec.Kueue.Integrations, topology.IntegrationTrainJob) {
		if kb.trainer, err = ensureOperator(ctx, p.opts.Assets.internal(), kb.bin, assets.TrainerOperator()); err != nil {
			return nil, nil, err
		}
		roots.trainer = kb.trainer.SourceDir
	}
	if p.nodes, err = prepareNodes(ctx, p.opts.Assets.internal(), p.opts, spec); err != nil {
		return nil, nil, err
	}
	cpNeeded := p.opts.ClusterProfileCRD || needs.ClusterProfileCRD
	mgrCRDs, err := loadCRDs(ctx, crdSources(spec.Kueue.Integrations, cpNeeded, p.opts.ServeKueueV1beta1, false, roots))
	if err != nil {
		return nil, nil, err
	}
	workerCRDs, err := loadCRDs(ctx, crdSources(spec.Kueue.Integrations, false, p.opts.ServeKueueV1beta1, true, roots))
	if err != nil {
		return nil, nil, err
	}
	hooks, err := loadWebhookConfigsAt(kb.bin.SourceDir, "kueue-")
	if err != nil {
		return nil, nil, err
	}
	var jobSetHooks webhookConfigs
	if roots.jobSet != "" {
		if jobSetHooks, err = loadWebhookConfigsAt(roots.jobSet, jobSetWebhookPrefix); err != nil {
			return nil, nil, err
		}
	}
	var appWrapperHooks webhookConfigs
	if roots.appWrapper != "" {
		if appWrapperHooks, err = loadWebhookConfigsFile(filepath.Join(roots.appWrapper, appWrapperWebhooks), appWrapperWebhookPrefix); err != nil {
			return nil, nil, err
		}
	}
	var kubeflowHooks webhookConfigs
	if roots.trainingOperator != "" {
		if kubeflowHooks, err = loadWebhookConfigsFile(filepath.Join(roots.trainingOperator, trainingOperatorWebhooks), trainingOperatorWebhookPrefix); err != nil {
			return nil, nil, err
		}
	}
	var lwsHooks webhookConfigs
	if roots.lws != "" {
		if lwsHooks, err = loadLWSWebhooks(roots.lws); err != nil {
			return nil, nil, err
		}
	}
	var trainerHooks webhookConfigs
	if roots.trainer != "" {
		if trainerHooks, err = loadWebhookConfigsFile(filepath.Join(roots.trainer, trainerWebhooks), trainerWebhookPrefix); err != nil {
			return nil, nil, err
		}
	}
	if !p.opts.DisableAudit {
		if p.auditPolicy, err = auditPolicy(spec); err != nil {
			return nil, nil, err
		}
	}

	names := spec.AllClusterNames()
	p.apiEnv = apiServerEnv(len(names)-1, p.opts.APIServerEnv)
	if p.opts.Etcd.shared(len(names) - 1) {
		fmt.Fprintf(spec.Progress, "local: starting the etcd the %d clusters share\n", len(names))
		etcd, err := startSharedEtcd(ctx, root, bins.Etcd, &p.ports, p.opts.StartTimeout)
		if err != nil {
			return nil, nil, err
		}
		p.mu.Lock()
		closed := p.closed
		if !closed {
			p.etcd = etcd // Close stops it, also when a cluster fails to start
		}
		p.mu.Unlock()
		if closed {
			return nil, nil, errors.Join(errors.New("local: provider closed during start"), etcd.stop())
		}
	}
	out := make([]*topology.Cluster, len(names))
	errs := make([]error, len(names))
	startOne := func(i int) {
		role, crds := topology.RoleWorker, workerCRDs
		if i == 0 {
			role, crds = topology.RoleManager, mgrCRDs
		}
		fmt.Fprintf(spec.Progress, "local: starting %s cluster %q\n", role, names[i])
		c, lc, err := p.startCluster(ctx, names[i], role, bins, crds, clusterHooks{kueue: hooks, jobSet: jobSetHooks, kubeflow: kubeflowHooks, appWrapper: appWrapperHooks, lws: lwsHooks, trainer: trainerHooks}, kb)
		if err == nil {
			k := lc.binary()
			err = publishKueueConfig(ctx, c, spec.Kueue.Namespace, k.configPath, k.reported)
		}
		out[i], errs[i] = c, err
	}
	if p.opts.Sequential {
		for i := range names {
			if startOne(i); errs[i] != nil {
				break
			}
		}
	} else {
		var wg sync.WaitGroup
		for i := range names {
			wg.Go(func() { startOne(i) })
		}
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return out[0], out[1:], nil
}

// clusterHooks are the webhook registrations a cluster's components serve.
type clusterHooks struct {
	kueue, jobSet, kubeflow, appWrapper, lws, trainer webhookConfigs
}

// startCluster starts one cluster's control plane, CRDs,
// kube-controller-manager, Kueue and its webhooks, and the real controllers
// of the integrations in use (JobSet's defaulting webhook everywhere, its
// controller and KubeRay on workers); on workers kube-scheduler, the KWOK
// controller and the Nodes.
func (p *Provider) startCluster(ctx context.Context, name string, role topology.Role, bins assets.Binaries,
	crds []*apiextensionsv1.CustomResourceDefinition, hooks clusterHooks, kb *binaryKueue) (*topology.Cluster, *localCluster, error) {
	dir := filepath.Join(p.root, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	cp, err := newControlPlane(name, dir, bins, p.opts.APIServerArgs, p.opts.StartTimeout)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster %q: certificates: %w", name, err)
	}
	cp.extraEnv = p.apiEnv
	cp.shared = p.etcd
	cp.ports = &p.ports
	if p.auditPolicy != nil {
		if err := cp.enableAudit(p.auditPolicy); err != nil {
			return nil, nil, err
		}
	}
	lc := &localCluster{name: name, cp: cp}
	if !p.track(lc) {
		return nil, nil, fmt.Errorf("cluster %q: provider closed during start", name)
	}
	if err := lc.prepareHA(p.opts, role); err != nil {
		return nil, nil, err
	}
	if err := cp.start(ctx); err != nil {
		return nil, nil, err
	}
	scheme, err := topology.NewScheme()
	if err != nil {
		return nil, nil, err
	}
	cfg := cp.restConfig()
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("cluster %q: client: %w", name, err)
	}
	kc, err := cp.kubeconfig()
	if err != nil {
		return nil, nil, err
	}
	c := &topology.Cluster{Name: name, Role: role, Config: cfg, Client: cl, Kubeconfig: kc, Lifecycle: lc}
	if err := installCRDsWithin(ctx, c, crds, p.opts.StartTimeout); err != nil {
		return nil, nil, err
	}
	worker := role == topology.RoleWorker
	ray := worker && hasCRD(crds, rayClusterCRD)
	// After the CRDs are served (the garbage collector and the namespace
	// controller then know their resources from the start; they rediscover
	// every 30 s), every component at once: none needs another to start, and
	// each start is mostly waiting for a process to answer.
	steps := []func() error{
		func() error { return cp.startControllerManager(ctx, kcmControllers(worker, kb.builtin)) },
		func() error { return lc.startBinaryKueue(ctx, c, kb, hooks.kueue, p.opts) },
	}
	if kb.jobSet.Path != "" {
		steps = append(steps, func() error { return lc.startJobSetBinary(ctx, c, kb.jobSet, hooks.jobSet, p.opts) })
	}
	if ray {
		steps = append(steps, func() error { return lc.startKubeRay(ctx, kb.kubeRay, p.opts) })
	}
	if kb.lws.Path != "" {
		steps = append(steps, func() error { return lc.startLWS(ctx, c, kb.lws, hooks.lws, p.opts) })
	}
	if worker && kb.appWrapper.Path != "" {
		steps = append(steps, func() error { return lc.startAppWrapper(ctx, c, kb.appWrapper, hooks.appWrapper, p.opts) })
	}
	if worker && kb.trainer.Path != "" {
		steps = append(steps, func() error { return lc.startTrainer(ctx, c, kb.trainer, hooks.trainer, p.opts) })
	}
	if worker && kb.mpiOperator.Path != "" {
		steps = append(steps, func() error { return lc.startMPIOperator(ctx, kb.mpiOperator, p.opts) })
	}
	if worker && kb.trainingOperator.Path != "" {
		steps = append(steps, func() error {
			return lc.startTrainingOperator(ctx, c, kb.trainingOperator, hooks.kubeflow, kb.kubeflowSchemes, p.opts)
		})
	}
	if worker {
		np := p.nodes.pools[name]
		steps = append(steps, func() error { return lc.startNodes(ctx, c, np, p.nodes, p.opts.StartTimeout) })
	}
	if err := together(steps...); err != nil {
		return nil, nil, err
	}
	return c, lc, nil
}

// together runs steps concurrently and returns their errors joined, once
// every step has returned.
func together(steps ...func() error) error {
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Go(func() { errs[i] = step() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CRD names that decide which real controllers a cluster runs.
const (
	jobSetCRD     = "jobsets.jobset.x-k8s.io"
	rayClusterCRD = "rayclusters.ray.io"
)

// runnableIntegrations refuses an integration whose controller the local
// topology does not run: Kueue would wait for a CRD no one installs and the
// jobs would never run.
func runnableIntegrations(integrations []string) error {
	for i, in := range integrations {
		switch in {
		case topology.IntegrationBatchJob, topology.IntegrationJobSet, topology.IntegrationRayJob, topology.IntegrationRayCluster, topology.IntegrationRayService,
			topology.IntegrationPod, topology.IntegrationDeployment, topology.IntegrationStatefulSet, topology.IntegrationLeaderWorkerSet:
		default:
			if _, ok := kubeflowScheme(in); ok || in == topology.IntegrationMPIJob || in == topology.IntegrationAppWrapper {
				continue
			}
			if in == topology.IntegrationTrainJob {
				// A TrainJob runs as a JobSet: Kueue's TrainJob
				// reconciler owns JobSets and the Trainer creates one.
				if !slices.Contains(integrations, topology.IntegrationJobSet) {
					return fmt.Errorf("local: topology.Options.Kueue.Integrations[%d]: %q needs %q too: a TrainJob runs as a JobSet, which the JobSet controller runs",
						i, in, topology.IntegrationJobSet)
				}
				continue
			}
			return fmt.Errorf("local: topology.Options.Kueue.Integrations[%d]: %q: the local topology runs the controllers of %s only; run other kinds on existing clusters whose operators are installed",
				i, in, strings.Join(runnable(), ", "))
		}
	}
	return nil
}

// runnable are the integrations whose controllers the local topology runs.
func runnable() []string {
	return []string{topology.IntegrationBatchJob, topology.IntegrationJobSet, topology.IntegrationRayJob, topology.IntegrationRayCluster, topology.IntegrationRayService,
		topology.IntegrationPyTorchJob, topology.IntegrationTFJob, topology.IntegrationXGBoostJob, topology.IntegrationPaddleJob, topology.IntegrationJAXJob,
		topology.IntegrationMPIJob, topology.IntegrationAppWrapper, topology.IntegrationTrainJob,
		topology.IntegrationPod, topology.IntegrationDeployment, topology.IntegrationStatefulSet, topology.IntegrationLeaderWorkerSet}
}

// isRayIntegration reports whether a Kueue integration is one of KubeRay's
// kinds.
func isRayIntegration(in string) bool {
	return in == topology.IntegrationRayJob || in == topology.IntegrationRayCluster || in == topology.IntegrationRayService
}

func hasCRD(crds []*apiextensionsv1.CustomResourceDefinition, name string) bool {
	for _, crd := range crds {
		if crd.Name == name {
			return true
		}
	}
	return false
}

func (p *Provider) track(lc *localCluster) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.clusters = append(p.clusters, lc)
	return true
}

// Close implements topology.Provider: it stops every in-process controller,
// Kueue, kube-controller-manager, API server and etcd (a shared etcd last),
// then removes the temporary directory.
func (p *Provider) Close(context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	clusters, root, etcd := p.clusters, p.root, p.etcd
	p.mu.Unlock()
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, lc := range clusters {
		wg.Go(func() { errs[i] = lc.close() })
	}
	wg.Wait()
	// After every API server that uses it.
	errs = append(errs, etcd.stop())
	if root != "" {
		if p.opts.KeepDir {
			_ = os.Remove(filepath.Join(root, ownerPIDFile)) // not stale: kept on purpose
			fmt.Fprintf(os.Stderr, "local: kept topology directory %s\n", root)
		} else {
			errs = append(errs, os.RemoveAll(root))
		}
	}
	return errors.Join(errs...)
}

// Dir is the provider's temporary directory (logs, certificates, etcd data).
// It is removed by Close.
func (p *Provider) Dir() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.root
}
