package local

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/internal/poll"
)

// controlPlane is one cluster's etcd and kube-apiserver, with a private CA,
// on free loopback ports, with all files below dir.
type controlPlane struct {
	cluster   string
	dir       string
	bins      assets.Binaries
	extraArgs []string
	// extraEnv is added to kube-apiserver's environment (Options.APIServerEnv).
	extraEnv []string
	timeout  time.Duration

	ca    *certAuthority
	admin keyPair
	// kueue, agent, kcmID, jobset and kuberay are the client identities of
	// the cluster's Kueue, of the library's own clients in it (the Ray
	// dashboard stand-in, the HA probe), of kube-controller-manager and of
	// the JobSet and KubeRay controllers: the audit log tells them from the
	// test (admin).
	kueue, agent, kcmID, jobset, kuberay, trainingOperator, mpiOperator, appWrapper, lws, trainer keyPair
	// schedulerID and kwokID are kube-scheduler's and the KWOK
	// controller's (workers with Options.Nodes).
	schedulerID, kwokID keyPair
	// autoscalerID is the simulated autoscaler's (Nodes.Autoscaler).
	autoscalerID keyPair
	// audit is the API server's audit log; nil when audit is off.
	audit *auditLog
	// shared is the topology's one etcd when the clusters share it
	// (Options.Etcd); then etcd is nil and the API server keeps its data
	// under its own key prefix.
	shared *sharedEtcd
	// ports hands out the topology's loopback ports.
	ports    *portPool
	etcdPort int
	// etcdMember is the cluster's own etcd's member name.
	etcdMember string
	apiPort    int
	etcd       *process
	api        *process
	// kcm is kube-controller-manager, started after the CRDs are served.
	kcm *process
}

const (
	// procStopTimeout bounds a stop; it is reached only when a process (or a
	// manager) hangs. A SIGKILLed kube-apiserver of several hundred MB took
	// over 10 s to be reaped at a load average of 70.
	procStopTimeout = 30 * time.Second
	adminUser       = "mktk-admin"
)

func newControlPlane(cluster, dir string, bins assets.Binaries, extraArgs []string, timeout time.Duration) (*controlPlane, error) {
	cp := &controlPlane{cluster: cluster, dir: dir, bins: bins, extraArgs: extraArgs, timeout: timeout}
	var err error
	if cp.ca, err = newCertAuthority(cluster + "-ca"); err != nil {
		return nil, err
	}
	serving, err := cp.ca.serving("kube-apiserver")
	if err != nil {
		return nil, err
	}
	if cp.admin, err = cp.ca.client(adminUser, "system:masters"); err != nil {
		return nil, err
	}
	if cp.kueue, err = cp.ca.client(kueueUser, "system:masters"); err != nil {
		return nil, err
	}
	for id, user := range map[*keyPair]string{&cp.agent: agentUser, &cp.kcmID: kcmUser, &cp.jobset: jobsetUser, &cp.kuberay: kuberayUser, &cp.trainingOperator: trainingOperatorUser, &cp.mpiOperator: mpiOperatorUser, &cp.appWrapper: appWrapperUser, &cp.lws: lwsUser, &cp.trainer: trainerUser, &cp.schedulerID: schedulerUser, &cp.kwokID: kwokUser, &cp.autoscalerID: autoscalerUser} {
		if *id, err = cp.ca.client(user, "system:masters"); err != nil {
			return nil, err
		}
	}
	sa, err := newSigningKey()
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		"ca.crt": cp.ca.certPEM, "apiserver.crt": serving.cert, "apiserver.key": serving.key, "sa.key": sa,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// start brings up etcd (unless the cluster uses the topology's shared one)
// and the API server, and waits until /readyz answers. A start that loses a
// port race is retried on fresh ports.
func (cp *controlPlane) start(ctx context.Context) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if cp.shared == nil {
			if cp.etcdPort, err = cp.ports.free(); err != nil {
				return err
			}
			cp.etcd, cp.etcdMember = newEtcd(cp.cluster, cp.dir, cp.bins.Etcd, cp.etcdPort, cp.ports)
		}
		if cp.apiPort, err = cp.ports.free(); err != nil {
			return err
		}
		cp.api = cp.newAPIServer()
		if err = cp.startOwnEtcd(ctx); err == nil {
			if err = cp.startAPIServer(ctx); err == nil {
				return nil
			}
		}
		_ = cp.stop()
		if !errors.Is(err, errPortInUse) {
			return err
		}
	}
	return err
}

var errPortInUse = errors.New("address already in use")

// startOwnEtcd starts the cluster's own etcd; with a shared one, nothing.
func (cp *controlPlane) startOwnEtcd(ctx context.Context) error {
	if cp.shared != nil {
		return nil
	}
	return startEtcd(ctx, cp.etcd, cp.etcdPort, cp.etcdMember, cp.timeout)
}

func (cp *controlPlane) newAPIServer() *process {
	f := func(name string) string { return filepath.Join(cp.dir, name) }
	args := []string{
		"--etcd-servers=" + cp.etcdURL(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.apiPort),
		"--cert-dir=" + f("apiserver-certs"),
		"--tls-cert-file=" + f("apiserver.crt"),
		"--tls-private-key-file=" + f("apiserver.key"),
		"--client-ca-file=" + f("ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://127.0.0.1:" + strconv.Itoa(cp.apiPort),
		"--service-account-key-file=" + f("sa.key"),
		"--service-account-signing-key-file=" + f("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// No controller-manager creates default ServiceAccounts here, and
		// none runs the node lifecycle controller that would lift the
		// not-ready taint TaintNodesByCondition puts on a new (KWOK) Node.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		// Test clusters serve one client; APF only costs start-up time.
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	if cp.shared != nil {
		args = append(args, "--etcd-prefix="+cp.shared.prefix(cp.cluster))
	}
	if cp.audit != nil {
		args = append(args,
			"--audit-policy-file="+f(auditPolicyFile),
			"--audit-log-path="+f(auditLogFile),
			"--audit-log-format=json",
			// Blocking (the default for the log backend): an event is in the
			// file when the response is. No rotation below 1 GiB.
			"--audit-log-mode=blocking",
			"--audit-log-maxsize=1024",
		)
	}
	return &process{
		name: "kube-apiserver", cluster: cp.cluster, path: cp.bins.APIServer, logPath: f("kube-apiserver.log"),
		args: append(args, cp.extraArgs...),
		// Every cluster runs an API server on the same CPUs: with half of
		// them each (one on 2 cores), a 1+3 start used 11 % less CPU and
		// time (BenchmarkStartupLevers, docs/performance.md, "Start-up levers").
		env: append([]string{"GOMAXPROCS=" + strconv.Itoa(max(1, runtime.NumCPU()/2))}, cp.extraEnv...),
	}
}

func (cp *controlPlane) startAPIServer(ctx context.Context) error {
	if err := cp.api.start(); err != nil {
		return err
	}
	tlsCfg, err := cp.clientTLS()
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer hc.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", cp.apiPort)
	return cp.waitHealthy(ctx, cp.api, fmt.Sprintf("cluster %q: kube-apiserver to answer %s", cp.cluster, url), func() error { return getOK(hc, url) })
}

// getOK returns nil when GET url answers 200.
func getOK(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// waitHealthy polls healthy until it passes, the process exits (then the
// error carries the log tail) or the timeout passes.
func (cp *controlPlane) waitHealthy(ctx context.Context, p *process, what string, healthy func() error) error {
	return waitHealthy(ctx, cp.timeout, p, what, healthy)
}

func waitHealthy(ctx context.Context, timeout time.Duration, p *process, what string, healthy func() error) error {
	return poll.Until(ctx, timeout, what, func(context.Context) error {
		if done, werr := p.exited(); done {
			tail := p.logTail(15)
			if strings.Contains(tail, "address already in use") {
				return poll.Stop(fmt.Errorf("%s: %s: %w", p.owner(), p.name, errPortInUse))
			}
			return poll.Stop(fmt.Errorf("%s: %s exited (%v); last log lines from %s:\n%s", p.owner(), p.name, werr, p.logPath, tail))
		}
		return healthy()
	})
}

func (cp *controlPlane) clientTLS() (*tls.Config, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.ca.certPEM)
	cert, err := tls.X509KeyPair(cp.admin.cert, cp.admin.key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// stop kills kube-controller-manager, the API server, then etcd (its own;
// a shared one is the provider's to stop).
func (cp *controlPlane) stop() error {
	var errs []error
	if cp.kcm != nil {
		errs = append(errs, cp.kcm.stop(procStopTimeout))
	}
	if cp.api != nil {
		errs = append(errs, cp.api.stop(procStopTimeout))
	}
	if cp.etcd != nil {
		errs = append(errs, cp.etcd.stop(procStopTimeout))
	}
	return errors.Join(errs...)
}

// etcdURL is the client URL of the cluster's etcd, its own or the shared one.
func (cp *controlPlane) etcdURL() string {
	if cp.shared != nil {
		return cp.shared.url()
	}
	return etcdClientURL(cp.etcdPort)
}

func (cp *controlPlane) host() string { return fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort) }

// restConfig is an admin config without client-side rate limiting.
func (cp *controlPlane) restConfig() *rest.Config { return cp.configAs(cp.admin) }

// configAs is restConfig for another of the cluster's client identities.
func (cp *controlPlane) configAs(id keyPair) *rest.Config {
	return &rest.Config{
		Host: cp.host(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData: cp.ca.certPEM, CertData: id.cert, KeyData: id.key,
		},
		QPS:   -1,
		Burst: 1000,
	}
}

// Audit files in the cluster's directory.
const (
	auditPolicyFile = "audit-policy.yaml"
	auditLogFile    = "audit.log"
)

func (cp *controlPlane) file(name string) string { return filepath.Join(cp.dir, name) }

// kubeconfig is the admin kubeconfig with inline credentials.
func (cp *controlPlane) kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cp.cluster] = &clientcmdapi.Cluster{Server: cp.host(), CertificateAuthorityData: cp.ca.certPEM}
	cfg.AuthInfos[adminUser] = &clientcmdapi.AuthInfo{ClientCertificateData: cp.admin.cert, ClientKeyData: cp.admin.key}
	cfg.Contexts[cp.cluster] = &clientcmdapi.Context{Cluster: cp.cluster, AuthInfo: adminUser}
	cfg.CurrentContext = cp.cluster
	return clientcmd.Write(*cfg)
}
