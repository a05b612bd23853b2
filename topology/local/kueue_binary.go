package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
)

// kueueBinary is one cluster's Kueue run as its real binary (cmd/kueue of
// the chosen version or checkout, see assets.EnsureKueue), with its
// configuration file, kubeconfig and certificates in its working directory
// <cluster>/kueue: the patched Kueue reads its visibility and metrics
// certificates from there (assets.KueuePatches).
type kueueBinary struct {
	controllerBinary
	bin            assets.Kueue
	configPath     string
	visibilityPort int
	// reported is the version the running Kueue says it is (the
	// gitVersion of its "Initializing" log line).
	reported string
}

// reportedVersion reads the version a Kueue process logged at start:
// cmd/kueue's first "Initializing" line carries gitVersion.
func reportedVersion(logPath string) (string, error) {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		return "", err
	}
	lines := strings.Split(string(raw), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if m := gitVersionRE.FindStringSubmatch(lines[i]); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("Kueue's log %s has no line with its gitVersion", logPath)
}

var gitVersionRE = regexp.MustCompile(`"gitVersion":"([^"]+)"`)

// kueueBinaryConfig is the configuration a cluster's Kueue binary runs
// with: the chart's configuration for the Spec (install.KueueConfig: what
// the chart would install) with what a process on loopback needs in place
// of what a Deployment has: its ports on 127.0.0.1, certificates handed to
// it instead of internal certificate management (there is no Service for
// it to put in a certificate), leader election as given (nil: off, one
// replica).
func kueueBinaryConfig(chartYAML string, gates map[string]bool, k *kueueBinary, webhookCertDir string, leaderElection map[string]any) ([]byte, error) {
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(chartYAML), &m); err != nil {
		return nil, fmt.Errorf("cluster %q: the chart's Kueue configuration: %w", k.cluster, err)
	}
	setLoopbackServing(m, k.controllerBinary, webhookCertDir)
	if len(gates) > 0 {
		// In the file, not on the command line as the chart passes them:
		// the ConfigMap the topology publishes (publishKueueConfig) is then
		// all of what runs, for ReadKueueFacts. Kueue refuses a gate given
		// both ways.
		m["featureGates"] = gates
	}
	if leaderElection != nil {
		m["leaderElection"] = leaderElection
	}
	vis := section(m, "visibilityServer")
	vis["bindPort"] = k.visibilityPort
	vis["bindAddress"] = "127.0.0.1"
	return yaml.Marshal(m)
}

// section is m[key] as a map, made when missing.
func section(m map[string]any, key string) map[string]any {
	s, _ := m[key].(map[string]any)
	if s == nil {
		s = map[string]any{}
		m[key] = s
	}
	return s
}

// setLoopbackServing sets, in a controller-runtime component configuration
// (Kueue's, JobSet's: the same keys), the health, metrics and webhook
// servers on b's loopback ports, the webhook certificates from certDir,
// internal certificate management and leader election off.
func setLoopbackServing(m map[string]any, b controllerBinary, certDir string) {
	addr := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	section(m, "health")["healthProbeBindAddress"] = addr(b.healthPort)
	section(m, "metrics")["bindAddress"] = addr(b.metricsPort)
	wh := section(m, "webhook")
	wh["port"] = b.webhookPort
	wh["host"] = "127.0.0.1"
	wh["certDir"] = certDir
	m["internalCertManagement"] = map[string]any{"enable": false}
	section(m, "leaderElection")["leaderElect"] = false
}

// binaryKueue is a topology's Kueue binary with the configuration its
// chart gives the Spec; every cluster runs it with its own ports.
type binaryKueue struct {
	bin       assets.Kueue
	chartYAML string
	gates     map[string]bool
	// execKubeconfig is the file the exec credentials plugins read as
	// KUBECONFIG (see writeKueueConfig), "" when there are none.
	execKubeconfig string
	namespace      string
	// jobSet is the JobSet controller binary, when the JobSet integration
	// is on (zero otherwise).
	jobSet assets.Operator
	// kubeRay is the KubeRay operator binary, when a Ray integration is on
	// (zero otherwise).
	kubeRay assets.Operator
	// trainingOperator is the Kubeflow training-operator binary, when a
	// Kubeflow training job integration is on (zero otherwise).
	trainingOperator assets.Operator
	// mpiOperator is the MPI operator binary, when the MPIJob integration
	// is on (zero otherwise).
	mpiOperator assets.Operator
	// appWrapper is the AppWrapper controller binary, when the AppWrapper
	// integration is on (zero otherwise).
	appWrapper assets.Operator
	// lws is the LeaderWorkerSet controller binary, when the LeaderWorkerSet
	// integration is on (zero otherwise).
	lws assets.Operator
	// trainer is the Kubeflow Trainer's controller binary, when the
	// TrainJob integration is on (zero otherwise).
	trainer assets.Operator
	// kubeflowSchemes are the training-operator's job kinds to run.
	kubeflowSchemes []string
	// builtin are the kube-controller-manager controllers of the built-in
	// serving kinds in use (builtinControllers).
	builtin []string
}

// sourceDir is the binary's source tree; "" for none (in-process Kueue).
func (b *binaryKueue) sourceDir() string {
	if b == nil {
		return ""
	}
	return b.bin.SourceDir
}

// prepareBinaryKueue finds or builds the Kueue binary and renders the
// configuration its chart gives the Spec.
func (p *Provider) prepareBinaryKueue(ctx context.Context, root string, spec topology.Spec, needs topology.KueueNeeds) (*binaryKueue, error) {
	bin, err := assets.EnsureKueue(ctx, p.opts.Assets.internal(), p.opts.Kueue.internal())
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	cfg := kueueConfiguration(root, spec, needs)
	y, gates, err := install.KueueConfig(filepath.Join(bin.SourceDir, "charts", "kueue"), cfg)
	if err != nil {
		return nil, fmt.Errorf("local: Kueue %s: %w", bin.Version, err)
	}
	kb := &binaryKueue{bin: bin, chartYAML: y, gates: gates, namespace: spec.Kueue.Namespace}
	if cp := cfg.MultiKueue.ClusterProfile; cp != nil {
		kb.execKubeconfig = execKubeconfigOf(cp, filepath.Join(root, spec.ManagerName, execPluginKubeconfig))
	}
	fmt.Fprintf(spec.Progress, "local: Kueue %s, the binary %s (%s)\n", bin.Version, bin.Path, bin.From)
	return kb, nil
}

// execKubeconfigOf is path when a credentials provider reads it as
// KUBECONFIG, else "".
func execKubeconfigOf(cp *configapi.ClusterProfile, path string) string {
	for _, prov := range cp.CredentialsProviders {
		for _, e := range prov.ExecConfig.Env {
			if e.Name == "KUBECONFIG" && e.Value == path {
				return path
			}
		}
	}
	return ""
}

// clusterProfileGate is Kueue's MultiKueueClusterProfile feature gate.
const clusterProfileGate = "MultiKueueClusterProfile"

// startBinaryKueue starts the cluster's Kueue binary and registers the
// webhooks it serves, by URL on 127.0.0.1; in HA mode (lc.ha) the replicas
// behind Services instead.
func (lc *localCluster) startBinaryKueue(ctx context.Context, c *topology.Cluster, kb *binaryKueue, hooks webhookConfigs, o Options) error {
	if err := lc.beforeKueue(ctx, kb, o); err != nil {
		return err
	}
	if lc.ha != nil {
		return lc.ha.start(ctx, c, lc, kb, hooks, o)
	}
	k, err := lc.newKueueBinary(kb, o, kueueProcessFiles{name: "kueue"})
	if err != nil {
		return err
	}
	lc.kueueBin = k
	if err := k.start(ctx); err != nil {
		return err
	}
	if k.reported, err = reportedVersion(k.proc.logPath); err != nil {
		return fmt.Errorf("cluster %q: %w", lc.name, err)
	}
	served, err := k.servedPaths(ctx, hooks.paths())
	if err != nil {
		return err
	}
	return registerWebhooks(ctx, c, hooks, served, k.webhookPort, lc.cp.ca.certPEM)
}

// beforeKueue does what must be in place before any Kueue process of the
// cluster starts: the ClusterProfile CRD when the gate is on, the exec
// credentials plugins' kubeconfig.
func (lc *localCluster) beforeKueue(ctx context.Context, kb *binaryKueue, o Options) error {
	if kb.gates[clusterProfileGate] {
		// A Kueue with the gate watches ClusterProfiles and exits after its
		// cache-sync timeout when the CRD is missing: install it first.
		if err := ensureClusterProfileCRD(ctx, lc.name, lc.cp.restConfig(), o.StartTimeout); err != nil {
			return err
		}
	}
	if kb.execKubeconfig != "" && filepath.Dir(kb.execKubeconfig) == lc.cp.dir {
		if err := lc.cp.writeNamespacedKubeconfig(kb.execKubeconfig, kueueUser, lc.cp.kueue, kb.namespace); err != nil {
			return fmt.Errorf("cluster %q: write the exec plugins' kubeconfig: %w", lc.name, err)
		}
	}
	return nil
}

// kueueProcessFiles says how one Kueue process of a cluster differs from
// the single one: its name (its working directory <cluster>/<name> and log
// <cluster>/<name>.log), its host name, its serving certificate, the API
// server address it dials and its leaderElection section.
type kueueProcessFiles struct {
	name, hostname string
	// serving is its serving certificate; nil issues one for 127.0.0.1.
	serving *keyPair
	// apiServer is the address in its kubeconfig; "" is the API server's.
	apiServer string
	// leaderElection is the configuration's section; nil turns it off.
	leaderElection map[string]any
}

// newKueueBinary allocates a Kueue process's ports and writes its
// certificates, kubeconfig and configuration, as the chart's Deployment
// would run it plus the kubeconfig a pod would not need and zap's level.
func (lc *localCluster) newKueueBinary(kb *binaryKueue, o Options, f kueueProcessFiles) (*kueueBinary, error) {
	k := &kueueBinary{bin: kb.bin, controllerBinary: controllerBinary{
		name: f.name, cluster: lc.name, path: kb.bin.Path, version: kb.bin.Version, hostname: f.hostname,
		dir: filepath.Join(lc.cp.dir, f.name), timeout: o.StartTimeout,
	}}
	if err := k.allocate(lc.cp, &k.visibilityPort); err != nil {
		return nil, err
	}
	const webhookCerts = "webhook-certs"
	certDirs := []string{webhookCerts, assets.KueueVisibilityCertDir, assets.KueueMetricsCertDir}
	var err error
	if f.serving != nil {
		err = k.writeCert(lc.cp, *f.serving, certDirs...)
	} else {
		err = k.writeServingCert(lc.cp, certDirs...)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %s's certificates: %w", lc.name, f.name, err)
	}
	server := f.apiServer
	if server == "" {
		server = lc.cp.host()
	}
	kubeconfig := filepath.Join(k.dir, "kueue.kubeconfig")
	if err := lc.cp.writeKubeconfigVia(kubeconfig, server, kueueUser, lc.cp.kueue, ""); err != nil {
		return nil, err
	}
	k.configPath = filepath.Join(k.dir, "config.yaml")
	k.configure = func() error {
		raw, err := kueueBinaryConfig(kb.chartYAML, kb.gates, k, filepath.Join(k.dir, webhookCerts), f.leaderElection)
		if err != nil {
			return err
		}
		return os.WriteFile(k.configPath, raw, 0o600)
	}
	if err := k.configure(); err != nil {
		return nil, err
	}
	k.args = []string{"--config=" + k.configPath, "--kubeconfig=" + kubeconfig}
	if o.KueueLogVerbosity > 0 {
		k.args = append(k.args, "--zap-log-level="+strconv.Itoa(o.KueueLogVerbosity))
	}
	return k, nil
}

// EnsureBinaries finds or builds every binary a local topology with these
// options runs — kube-apiserver, etcd, kube-controller-manager, the Kueue
// binary, kube-scheduler, the KWOK controller and, for the integrations
// named, the operators' (JobSet, KubeRay, the training-operator, the MPI
// operator, the AppWrapper controller) — without
// starting anything. A cold build takes tens of minutes on 2 cores; call it
// from TestMain before m.Run (or before a suite's timeouts start), as the
// bundled examples do, so that no test's timeout counts it. Later calls
// find everything in the cache at once.
func EnsureBinaries(ctx context.Context, o Options, integrations ...string) error {
	ao := o.Assets.internal()
	if _, err := assets.Ensure(ctx, ao); err != nil {
		return err
	}
	bin, err := assets.EnsureKueue(ctx, ao, o.Kueue.internal())
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	if slices.Contains(integrations, topology.IntegrationJobSet) {
		if _, err := ensureJobSet(ctx, ao, bin); err != nil {
			return err
		}
	}
	if slices.ContainsFunc(integrations, isRayIntegration) {
		if _, err := ensureKubeRay(ctx, ao, bin); err != nil {
			return err
		}
	}
	if len(kubeflowSchemes(integrations)) > 0 {
		if _, err := ensureTrainingOperator(ctx, ao, bin); err != nil {
			return err
		}
	}
	if slices.Contains(integrations, topology.IntegrationMPIJob) {
		if _, err := ensureMPIOperator(ctx, ao, bin); err != nil {
			return err
		}
	}
	if slices.Contains(integrations, topology.IntegrationAppWrapper) {
		if _, err := ensureOperator(ctx, ao, bin, assets.AppWrapperOperator()); err != nil {
			return err
		}
	}
	if slices.Contains(integrations, topology.IntegrationLeaderWorkerSet) {
		if _, err := ensureOperator(ctx, ao, bin, assets.LWSOperator()); err != nil {
			return err
		}
	}
	if slices.Contains(integrations, topology.IntegrationTrainJob) {
		if _, err := ensureOperator(ctx, ao, bin, assets.TrainerOperator()); err != nil {
			return err
		}
	}
	if _, err := assets.EnsureScheduler(ctx, ao); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	if _, err := assets.EnsureOperator(ctx, ao, assets.KWOKController(), KWOKVersion); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	return nil
}
