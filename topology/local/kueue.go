package local

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap/zapcore"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuealpha "sigs.k8s.io/kueue/apis/kueue/v1alpha1"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	kueueconfig "sigs.k8s.io/kueue/pkg/config"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/admissionchecks/multikueue"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/controller/failurerecovery"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/controller/tas"
	tasindexer "sigs.k8s.io/kueue/pkg/controller/tas/indexer"
	dispatcher "sigs.k8s.io/kueue/pkg/controller/workloaddispatcher"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/util/kubeversion"
	"sigs.k8s.io/kueue/pkg/webhooks"

	// Link every job integration, as cmd/kueue does.
	_ "sigs.k8s.io/kueue/pkg/controller/jobs"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// kueueProcess is one cluster's Kueue, run in this Go process the way
// cmd/kueue/main.go wires it. It can be stopped and started again: every start
// builds a fresh controller-runtime Manager from the same configuration file,
// on the same webhook port.
type kueueProcess struct {
	cluster     string
	restConfig  *rest.Config
	configPath  string
	logPath     string
	certDir     string
	webhookPort int
	// caPEM is the CA of the webhook server's certificate, for the
	// readiness probe.
	caPEM     []byte
	batch     time.Duration
	verbosity int
	// startTimeout bounds start's wait for readiness; zero means the
	// default (startTimeout).
	startTimeout time.Duration

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
	// server is the last manager's webhook server; its routes are the
	// webhooks this Kueue serves.
	server webhook.Server

	// replica, in HA mode, makes this Kueue one replica of several: leader
	// election on Kueue's Lease under the replica's identity, a visibility
	// server, a network that kill can cut (ha_replica.go). Nil: one Kueue,
	// no leader election.
	replica *replica
}

// writeKueueConfig writes the Kueue Configuration for spec and the
// connector's needs into dir and returns its path. The file is what
// `kueue --config` would read. With chartConcurrency its controller section
// (reconciles in parallel per kind) is the one Kueue ships in its manager
// configuration (kueueManagerController), as the chart and the release
// manifests run it (Options.ChartConcurrency).
//
// Exec credentials plugins (multiKueue.clusterProfile.credentialsProviders)
// that do not set KUBECONFIG get KUBECONFIG=<dir>/<manager>/exec-plugin.kubeconfig:
// the manager as its in-process Kueue reaches it, with Kueue's namespace as
// the context namespace, which the manager's Kueue writes before it starts.
// That is the local stand-in for the in-cluster config a plugin sees in the
// Kueue pod (cluster-inventory-api's secretreader reads Secrets with it).
func writeKueueConfig(ctx context.Context, dir string, spec topology.Spec, needs topology.KueueNeeds, chartConcurrency bool) (string, error) {
	cfg, err := kueueConfiguration(ctx, dir, spec, needs, chartConcurrency)
	if err != nil {
		return "", err
	}
	raw, err := yaml.Marshal(&cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kueue-config.yaml")
	return path, os.WriteFile(path, raw, 0o600)
}

// kueueConfiguration is the configuration writeKueueConfig writes.
func kueueConfiguration(ctx context.Context, dir string, spec topology.Spec, needs topology.KueueNeeds, chartConcurrency bool) (configapi.Configuration, error) {
	cfg := spec.KueueConfiguration(needs)
	if chartConcurrency && cfg.Controller == nil {
		ctrlCfg, err := kueueManagerController(ctx)
		if err != nil {
			return cfg, err
		}
		cfg.Controller = ctrlCfg
	}
	if cp := cfg.MultiKueue.ClusterProfile; cp != nil {
		for i := range cp.CredentialsProviders {
			ec := &cp.CredentialsProviders[i].ExecConfig
			if !slices.ContainsFunc(ec.Env, func(e clientcmdapi.ExecEnvVar) bool { return e.Name == "KUBECONFIG" }) {
				ec.Env = append(slices.Clone(ec.Env), clientcmdapi.ExecEnvVar{
					Name: "KUBECONFIG", Value: filepath.Join(dir, spec.ManagerName, execPluginKubeconfig),
				})
			}
		}
	}
	return cfg, nil
}

// kueueScheme is the scheme cmd/kueue builds, fresh for every manager.
func kueueScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, schedulingv1.AddToScheme, resourceapi.AddToScheme,
		kueue.AddToScheme, kueuev1beta1.AddToScheme, kueuealpha.AddToScheme,
		configapi.AddToScheme, inventoryv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	err := jobframework.ForEachIntegration(func(_ string, cb jobframework.IntegrationCallbacks) error {
		if cb.AddToScheme != nil {
			return cb.AddToScheme(s)
		}
		return nil
	})
	return s, err
}

// probeTLS is the readiness probe's TLS configuration: the webhook server's
// certificate verified against caPEM, or not verified when there is none.
func (k *kueueProcess) probeTLS() *tls.Config {
	if len(k.caPEM) == 0 {
		return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // readiness probe only
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(k.caPEM)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// start builds the manager, starts it and waits until its caches are synced
// and its webhook server accepts TLS connections.
func (k *kueueProcess) start(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cancel != nil {
		return fmt.Errorf("cluster %q: Kueue is already running", k.cluster)
	}
	mgr, err := k.build(ctx)
	if err != nil {
		return fmt.Errorf("cluster %q: set up Kueue: %w", k.cluster, err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	k.cancel, k.done = cancel, done

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(k.webhookPort))
	timeout := k.startTimeout
	if timeout == 0 {
		timeout = startTimeout
	}
	err = poll.Until(ctx, timeout, fmt.Sprintf("cluster %q: Kueue caches to sync and its webhook server to listen on %s", k.cluster, addr), func(ctx context.Context) error {
		select {
		case err := <-done:
			done <- err
			return poll.Stop(fmt.Errorf("cluster %q: Kueue manager exited: %w (log: %s)", k.cluster, err, k.logPath))
		default:
		}
		// Verified against the cluster's CA: a server of another cluster
		// or process on the same port must not pass for this one.
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, k.probeTLS())
		if err != nil {
			return err
		}
		conn.Close()
		syncCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(syncCtx) {
			return errors.New("caches not synced yet")
		}
		return nil
	})
	if err != nil {
		k.stopLocked()
		return err
	}
	return nil
}

// stop stops the manager and waits for it to return.
func (k *kueueProcess) stop() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopLocked()
}

func (k *kueueProcess) stopLocked() error {
	if k.cancel == nil {
		return nil
	}
	k.cancel()
	k.cancel = nil
	select {
	case err := <-k.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("cluster %q: Kueue manager: %w", k.cluster, err)
		}
		return nil
	case <-time.After(procStopTimeout):
		return fmt.Errorf("cluster %q: Kueue manager did not stop within %s%s", k.cluster, procStopTimeout, k.dumpGoroutines())
	}
}

// dumpGoroutines writes this process's goroutines next to the Kueue log,
// for a manager that does not stop, and says where (or why not).
func (k *kueueProcess) dumpGoroutines() string {
	path := strings.TrimSuffix(k.logPath, ".log") + "-goroutines.txt"
	f, err := os.Create(path)
	if err != nil {
		return fmt.Sprintf(" (no goroutine dump: %v)", err)
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return fmt.Sprintf(" (goroutine dump failed: %v)", err)
	}
	return "; the test process's goroutines are in " + path
}

// build follows cmd/kueue/main.go: load the configuration, create the manager
// and set up indexes, caches, queues, core controllers, MultiKueue, the job
// integrations, webhooks and the scheduler. What main.go does and this does
// not: metrics and health servers, internal cert management (certificates
// are ours), provisioning requests; leader election, the role tracker and
// the visibility server only in HA mode (k.replica).
func (k *kueueProcess) build(ctx context.Context) (_ manager.Manager, err error) {
	scheme, err := kueueScheme()
	if err != nil {
		return nil, err
	}
	options, cfg, err := kueueconfig.Load(scheme, k.configPath)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", k.configPath, err)
	}
	if len(cfg.FeatureGates) > 0 {
		// Process-global, as in cmd/kueue: every in-process Kueue shares it.
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
			return nil, fmt.Errorf("feature gates: %w", err)
		}
	}
	if err := k.writeExecPluginKubeconfig(cfg); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(k.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			logf.Close() // the manager that would close it will not run
		}
	}()
	logger := zap.New(zap.WriteTo(logf), zap.Level(zapcore.Level(-k.verbosity)))
	options.Logger = logger
	options.Metrics = metricsserver.Options{BindAddress: "0"}
	options.HealthProbeBindAddress = "0"
	options.PprofBindAddress = "0"
	options.LeaderElection = false
	if k.replica != nil {
		if err := k.replica.leaderElection(&options, cfg, k.restConfig); err != nil {
			return nil, err
		}
	}
	options.Controller.SkipNameValidation = ptr.To(true)
	options.WebhookServer = webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: k.webhookPort, CertDir: k.certDir})

	if features.Enabled(features.MultiKueueClusterProfile) {
		// As cmd/kueue: ClusterProfiles are cached in Kueue's namespace only.
		if err := ensureClusterProfileCRD(ctx, k.cluster, k.restConfig, k.timeout()); err != nil {
			return nil, err
		}
		if err := kueueconfig.ConfigureClusterProfileCache(ctx, logger, &options, k.restConfig, cfg); err != nil {
			return nil, fmt.Errorf("ClusterProfile cache: %w", err)
		}
	}

	mgr, err := ctrl.NewManager(k.restConfig, options)
	if err != nil {
		return nil, err
	}
	k.server = options.WebhookServer
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		return logf.Close()
	})); err != nil {
		return nil, err
	}
	roleTracker, err := k.replica.roleTracker(mgr, logger)
	if err != nil {
		return nil, err
	}
	cCache := schdcache.New(mgr.GetClient(), schdcache.WithRoleTracker(roleTracker))
	requeuer := qcache.NewRequeuer()
	if err := mgr.Add(requeuer); err != nil {
		return nil, err
	}
	expectations := preemptexpectations.New()
	queues := qcache.NewManager(mgr.GetClient(), cCache, requeuer, qcache.WithPreemptionExpectations(expectations), qcache.WithRoleTracker(roleTracker))

	// Indexes.
	if err := indexer.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if features.Enabled(features.TopologyAwareScheduling) {
		if err := tasindexer.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
			return nil, err
		}
	}
	if features.Enabled(features.MultiKueue) {
		if err := multikueue.SetupIndexer(ctx, mgr.GetFieldIndexer(), *cfg.Namespace); err != nil {
			return nil, err
		}
	}
	if err := jobframework.SetupIndexes(ctx, mgr.GetFieldIndexer(), jobframework.WithEnabledFrameworks(cfg.Integrations.Frameworks)); err != nil {
		return nil, err
	}

	dc, err := discovery.NewDiscoveryClientForConfig(k.restConfig)
	if err != nil {
		return nil, err
	}
	versions := kubeversion.NewServerVersionFetcher(dc)
	if err := mgr.Add(versions); err != nil {
		return nil, err
	}
	if err := versions.FetchServerVersion(); err != nil {
		return nil, fmt.Errorf("fetch server version: %w", err)
	}

	// Controllers.
	if name, err := core.SetupControllers(mgr, queues, cCache, &cfg, roleTracker, expectations, nil); err != nil {
		return nil, fmt.Errorf("core controller %s: %w", name, err)
	}
	if features.Enabled(features.FailureRecoveryPolicy) {
		if name, err := failurerecovery.SetupControllers(mgr, &cfg, roleTracker); err != nil {
			return nil, fmt.Errorf("failure recovery controller %s: %w", name, err)
		}
	}
	if features.Enabled(features.MultiKueue) {
		adapters, err := jobframework.GetMultiKueueAdapters(sets.New(cfg.Integrations.Frameworks...))
		if err != nil {
			return nil, err
		}
		opts := []multikueue.SetupOption{
			multikueue.WithGCInterval(cfg.MultiKueue.GCInterval.Duration),
			multikueue.WithOrigin(ptr.Deref(cfg.MultiKueue.Origin, configapi.DefaultMultiKueueOrigin)),
			multikueue.WithWorkerLostTimeout(cfg.MultiKueue.WorkerLostTimeout.Duration),
			multikueue.WithAdapters(adapters),
			multikueue.WithDispatcherName(ptr.Deref(cfg.MultiKueue.DispatcherName, configapi.MultiKueueDispatcherModeAllAtOnce)),
			multikueue.WithClusterProfiles(cfg.MultiKueue.ClusterProfile),
			multikueue.WithRoleTracker(roleTracker),
		}
		if k.batch > 0 {
			opts = append(opts, multikueue.WithEventsBatchPeriod(k.batch))
		}
		if err := multikueue.SetupControllers(mgr, *cfg.Namespace, opts...); err != nil {
			return nil, fmt.Errorf("MultiKueue controllers: %w", err)
		}
		if name, err := dispatcher.SetupControllers(mgr, &cfg, roleTracker); err != nil {
			return nil, fmt.Errorf("MultiKueue dispatcher %s: %w", name, err)
		}
	}
	if features.Enabled(features.TopologyAwareScheduling) {
		if name, err := tas.SetupControllers(mgr, queues, cCache, &cfg, roleTracker); err != nil {
			return nil, fmt.Errorf("TAS controller %s: %w", name, err)
		}
	}
	nsSelector, err := metav1.LabelSelectorAsSelector(cfg.ManagedJobsNamespaceSelector)
	if err != nil {
		return nil, err
	}
	jobOpts := []jobframework.Option{
		jobframework.WithManageJobsWithoutQueueName(cfg.ManageJobsWithoutQueueName),
		jobframework.WithWaitForPodsReady(cfg.WaitForPodsReady),
		jobframework.WithKubeServerVersion(versions),
		jobframework.WithEnabledFrameworks(cfg.Integrations.Frameworks),
		jobframework.WithEnabledExternalFrameworks(cfg.Integrations.ExternalFrameworks),
		jobframework.WithManagerName(constants.KueueName),
		jobframework.WithLabelKeysToCopy(cfg.Integrations.LabelKeysToCopy),
		jobframework.WithCache(cCache),
		jobframework.WithQueues(queues),
		jobframework.WithObjectRetentionPolicies(cfg.ObjectRetentionPolicies),
		jobframework.WithManagedJobsNamespaceSelector(nsSelector),
		jobframework.WithRoleTracker(roleTracker),
	}
	// Kueue's RayJob reconciler is process-global; each cluster gets its own
	// (kueue_rayjob.go).
	frameworks, err := setupRayJobIntegration(mgr, cfg.Integrations.Frameworks, jobOpts...)
	if err != nil {
		return nil, fmt.Errorf("job integrations: %w", err)
	}
	if err := jobframework.SetupControllers(ctx, mgr, logger.WithName("jobframework"),
		append(jobOpts, jobframework.WithEnabledFrameworks(frameworks))...); err != nil {
		return nil, fmt.Errorf("job integrations: %w", err)
	}
	if name, err := webhooks.Setup(mgr, roleTracker); err != nil {
		return nil, fmt.Errorf("webhook %s: %w", name, err)
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		go queues.CleanUpOnContext(ctx)
		go cCache.CleanUpOnContext(ctx)
		<-ctx.Done()
		return nil
	})); err != nil {
		return nil, err
	}
	sched := scheduler.New(queues, cCache, mgr.GetClient(), mgr.GetEventRecorderFor(constants.AdmissionName),
		scheduler.WithPreemptionExpectations(expectations), scheduler.WithRoleTracker(roleTracker))
	if err := mgr.Add(sched); err != nil {
		return nil, err
	}
	if k.replica != nil {
		// cmd/kueue starts it on every replica when VisibilityOnDemand is
		// on (its default); here every HA replica serves it.
		if err := k.replica.addVisibility(mgr, queues, &cfg); err != nil {
			return nil, err
		}
	}
	if features.Enabled(features.MultiKueueClusterProfile) {
		// Another topology of this process may have turned the gate on while
		// the controllers above were set up: they then watch ClusterProfiles.
		if err := ensureClusterProfileCRD(ctx, k.cluster, k.restConfig, k.timeout()); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// timeout is startTimeout, or the default when it is zero.
func (k *kueueProcess) timeout() time.Duration {
	if k.startTimeout == 0 {
		return startTimeout
	}
	return k.startTimeout
}

// execPluginKubeconfig is the file, in the manager's directory, that exec
// credentials plugins get as KUBECONFIG (see writeKueueConfig).
const execPluginKubeconfig = "exec-plugin.kubeconfig"

// writeExecPluginKubeconfig writes, when the configuration's credentials
// providers point KUBECONFIG at this cluster's directory, a kubeconfig with
// this Kueue's own credentials and Kueue's namespace there (mode 0600, removed
// with the topology directory).
func (k *kueueProcess) writeExecPluginKubeconfig(cfg configapi.Configuration) error {
	if cfg.MultiKueue == nil || cfg.MultiKueue.ClusterProfile == nil {
		return nil
	}
	path := filepath.Join(filepath.Dir(k.logPath), execPluginKubeconfig)
	pointed := false
	for _, p := range cfg.MultiKueue.ClusterProfile.CredentialsProviders {
		for _, e := range p.ExecConfig.Env {
			pointed = pointed || (e.Name == "KUBECONFIG" && e.Value == path)
		}
	}
	if !pointed {
		return nil
	}
	rc := k.restConfig
	kc := clientcmdapi.NewConfig()
	kc.Clusters[k.cluster] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	kc.AuthInfos[k.cluster] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData, Token: rc.BearerToken}
	kc.Contexts[k.cluster] = &clientcmdapi.Context{Cluster: k.cluster, AuthInfo: k.cluster, Namespace: *cfg.Namespace}
	kc.CurrentContext = k.cluster
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("cluster %q: write the exec plugins' kubeconfig: %w", k.cluster, err)
	}
	return os.Chmod(path, 0o600)
}

// pinnedKueueVersion is the version of the sigs.k8s.io/kueue module linked
// into this process (the in-process Kueue's), "" when it cannot be told.
func pinnedKueueVersion(ctx context.Context) string {
	if v, err := modsrc.Version(modsrc.Kueue); err == nil {
		return v
	}
	// Test binaries carry no build info: the module cache directory says.
	dir, err := modsrc.Dir(ctx, modsrc.Kueue)
	if err != nil {
		return ""
	}
	if i := strings.LastIndex(dir, "@"); i >= 0 {
		return dir[i+1:]
	}
	return ""
}
