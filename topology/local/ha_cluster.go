package local

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// haCluster runs one cluster's Kueue as several replicas: the replicas
// (kueueProcess with a replica), the egress proxy that is their network as
// the API server sees it, the Services and EndpointSlices through which the
// API server reaches them, and the stand-in for the kubelet's readiness
// probe and the EndpointSlice controller (probe).
type haCluster struct {
	cluster string
	dir     string
	ha      HA // resolved
	cp      *controlPlane
	proxy   *egressProxy

	// Set by start.
	namespace string
	caPEM     []byte
	client    client.Client // the agent's identity: it plays the kubelet and the EndpointSlice controller
	replicas  []*kueueProcess
	services  haServices

	mu sync.Mutex
	// down marks replicas stopped or killed on purpose, terminating those
	// stopped gracefully (their endpoints say so at once, as a deleted
	// pod's do).
	down, terminating map[string]bool
	// ready is the readiness last written to the EndpointSlices.
	ready       map[string]bool
	written     bool
	probeCancel context.CancelFunc
	probeDone   chan struct{}
}

// prepareHA sets up HA for the cluster when its role runs it: the egress
// proxy and the API server flags it needs (before the API server starts).
func (lc *localCluster) prepareHA(o Options, role topology.Role) error {
	h := o.HA
	if h.replicas(role) < 2 {
		return nil
	}
	// The replicas' leader election (client-go) and visibility servers
	// (k8s.io/apiserver) log through klog, to stderr by default: send it
	// where controller-runtime's global logger goes (installLogger).
	if o.Logger != nil {
		klog.SetLogger(*o.Logger)
	} else {
		klog.SetLogger(logr.Discard())
	}
	proxy, err := newEgressProxy(lc.name, lc.cp.dir)
	if err != nil {
		return err
	}
	lc.ha = &haCluster{cluster: lc.name, dir: lc.cp.dir, ha: h.resolved(), cp: lc.cp, proxy: proxy,
		down: map[string]bool{}, terminating: map[string]bool{}, ready: map[string]bool{}}
	lc.ha.ha.Replicas = h.replicas(role)
	args, err := haAPIServerArgs(lc.cp.dir, proxy.sock)
	if err != nil {
		return fmt.Errorf("cluster %q: HA: %w", lc.name, err)
	}
	lc.cp.extraArgs = withArgs(lc.cp.extraArgs, args...)
	return nil
}

// startKueue starts the cluster's Kueue and registers its webhooks: one
// Kueue whose webhooks the API server calls by URL, or, in HA mode, the
// replicas behind Services.
func (lc *localCluster) startKueue(ctx context.Context, c *topology.Cluster, hooks webhookConfigs) error {
	if lc.ha == nil {
		// Nothing refers to the webhook port before registerWebhooks: a
		// start that lost its port to another process is retried on a
		// fresh one.
		err := lc.kueue.start(ctx)
		for attempt := 1; attempt < 3 && errors.Is(err, syscall.EADDRINUSE); attempt++ {
			if lc.kueue.webhookPort, err = lc.cp.ports.free(); err != nil {
				return err
			}
			err = lc.kueue.start(ctx)
		}
		if err != nil {
			return err
		}
		return registerWebhooks(ctx, c, hooks, servedBy(lc.kueue.server), lc.kueue.webhookPort, lc.cp.ca.certPEM)
	}
	return lc.ha.start(ctx, c, lc.kueue, hooks)
}

// Files of the replicas in the cluster's directory.
const (
	replicaCertDir    = "kueue-replicas-certs"
	replicaKubeconfig = "kueue-replicas.kubeconfig"
)

// start builds the replicas from first (the cluster's Kueue as the
// single-replica topology would run it; it becomes kueue-0), starts kueue-0
// and waits until it leads, starts the others, then registers the Services,
// their endpoints, the webhooks and the visibility APIServices, and waits
// until the APIServices are Available.
func (h *haCluster) start(ctx context.Context, c *topology.Cluster, first *kueueProcess, hooks webhookConfigs) error {
	cfg, err := readKueueConfig(first.configPath)
	if err != nil {
		return fmt.Errorf("cluster %q: %w", h.cluster, err)
	}
	h.namespace = ptr.Deref(cfg.Namespace, configapi.DefaultNamespace)
	h.caPEM = h.cp.ca.certPEM
	if h.client, err = client.New(h.cp.configAs(h.cp.agent), client.Options{}); err != nil {
		return err
	}
	if h.services, err = loadHAServices(ctx, h.namespace); err != nil {
		return fmt.Errorf("cluster %q: %w", h.cluster, err)
	}
	// The Lease lives in Kueue's namespace.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c.Client, ns, func() error { return nil }); err != nil {
		return fmt.Errorf("cluster %q: create Namespace %s: %w", h.cluster, h.namespace, err)
	}
	certDir, err := h.writeReplicaFiles()
	if err != nil {
		return fmt.Errorf("cluster %q: replicas' certificates: %w", h.cluster, err)
	}
	authKubeconfig := filepath.Join(h.dir, replicaKubeconfig)
	for i := range h.ha.Replicas {
		k := first
		if i > 0 {
			port, err := h.cp.ports.free()
			if err != nil {
				return err
			}
			k = &kueueProcess{cluster: first.cluster, configPath: first.configPath, webhookPort: port, caPEM: first.caPEM,
				batch: first.batch, verbosity: first.verbosity, startTimeout: first.startTimeout}
		}
		visPort, err := h.cp.ports.free()
		if err != nil {
			return err
		}
		r := &replica{cluster: h.cluster, name: replicaName(i), index: i, visibilityPort: visPort,
			visibilityCert: filepath.Join(certDir, "tls.crt"), visibilityKey: filepath.Join(certDir, "tls.key"),
			authKubeconfig: authKubeconfig, net: newCuttableNet()}
		k.replica = r
		k.certDir = certDir
		k.logPath = filepath.Join(h.dir, r.name+".log")
		k.restConfig = withNet(h.cp.configAs(h.cp.kueue), r.net)
		h.replicas = append(h.replicas, k)
		h.proxy.route(podAddress(i, h.services.webhookTargetPort), k.webhookPort)
		h.proxy.route(podAddress(i, h.services.visibilityTargetPort), visPort)
	}
	// kueue-0 first, so that the leader at start is known.
	if err := h.startReplica(ctx, h.replicas[0]); err != nil {
		return err
	}
	if err := h.waitLeader(ctx, h.replicas[0].replica.name, h.ha.LeaseDuration+h.timeout()); err != nil {
		return err
	}
	errs := make([]error, len(h.replicas))
	var wg sync.WaitGroup
	for i, k := range h.replicas[1:] {
		wg.Go(func() { errs[i] = h.startReplica(ctx, k) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := h.probeOnce(ctx); err != nil {
		return err
	}
	if err := h.register(ctx, c, hooks); err != nil {
		return err
	}
	h.startProbe()
	return h.waitAPIServicesAvailable(ctx)
}

func (h *haCluster) timeout() time.Duration { return h.cp.timeout }

// writeReplicaFiles writes the replicas' serving certificate (for
// 127.0.0.1, localhost and the two Services' DNS names, which the API server
// checks when it calls through a Service) and the kubeconfig of their
// visibility servers' delegated authentication (Kueue's identity).
func (h *haCluster) writeReplicaFiles() (string, error) {
	dir := filepath.Join(h.dir, replicaCertDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	kp, err := h.cp.ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kueue-replicas"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost", h.services.webhook.dnsName(), h.services.visibility.dnsName()},
	})
	if err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{"tls.crt": kp.cert, "tls.key": kp.key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	id := h.cp.kueue
	kc := clientcmdapi.NewConfig()
	kc.Clusters[h.cluster] = &clientcmdapi.Cluster{Server: h.cp.host(), CertificateAuthorityData: h.cp.ca.certPEM}
	kc.AuthInfos[kueueUser] = &clientcmdapi.AuthInfo{ClientCertificateData: id.cert, ClientKeyData: id.key}
	kc.Contexts[h.cluster] = &clientcmdapi.Context{Cluster: h.cluster, AuthInfo: kueueUser}
	kc.CurrentContext = h.cluster
	path := filepath.Join(h.dir, replicaKubeconfig)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", err
	}
	return dir, os.Chmod(path, 0o600)
}

// startReplica starts k and waits until its visibility server answers
// /readyz directly.
func (h *haCluster) startReplica(ctx context.Context, k *kueueProcess) error {
	k.replica.net.setCut(false)
	if err := k.start(ctx); err != nil {
		return fmt.Errorf("replica %s: %w", k.replica.name, err)
	}
	hc := h.directClient()
	defer hc.CloseIdleConnections()
	u := fmt.Sprintf("https://127.0.0.1:%d/readyz", k.replica.visibilityPort)
	if err := poll.Until(ctx, h.timeout(), fmt.Sprintf("cluster %q: replica %s's visibility server to answer %s", h.cluster, k.replica.name, u),
		func(context.Context) error { return getOK(hc, u) }); err != nil {
		return err
	}
	h.mu.Lock()
	delete(h.down, k.replica.name)
	delete(h.terminating, k.replica.name)
	h.mu.Unlock()
	return nil
}

// directClient reaches a replica's servers on loopback with the cluster's CA
// and admin certificate.
func (h *haCluster) directClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.cp.ca.certPEM)
	cert, _ := tls.X509KeyPair(h.cp.admin.cert, h.cp.admin.key)
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}
}

// stopReplica stops one replica. Gracefully (kill false), as a pod deleted
// with SIGTERM: its endpoints turn terminating at once and controller-runtime
// shuts down in order and releases the Lease if it leads (Kueue's
// config.Load sets LeaderElectionReleaseOnCancel). Killed (kill true), as a
// crashed process: its network to its API server is cut and every runnable's
// context cancelled at once, so it cannot release the Lease, and reconciles
// in flight abort their requests (to the workers too, which the cut does not
// reach: MultiKueue's clients are built from the shared kubeconfig Secret);
// its endpoints stay ready until the readiness probe fails.
func (h *haCluster) stopReplica(k *kueueProcess, kill bool) error {
	name := k.replica.name
	h.mu.Lock()
	h.down[name] = true
	if !kill {
		h.terminating[name] = true
	}
	h.mu.Unlock()
	if kill {
		k.replica.net.setCut(true)
		k.replica.crashNow()
	} else if err := h.writeEndpoints(context.Background(), h.readiness()); err != nil {
		return err
	}
	return k.stop()
}

func (h *haCluster) replica(name string) (*kueueProcess, error) {
	for _, k := range h.replicas {
		if k.replica.name == name {
			return k, nil
		}
	}
	names := make([]string, len(h.replicas))
	for i, k := range h.replicas {
		names[i] = k.replica.name
	}
	return nil, fmt.Errorf("cluster %q has no Kueue replica %q (it has %v)", h.cluster, name, names)
}

// stopAll stops every replica gracefully (Lifecycle.StopKueue).
func (h *haCluster) stopAll(context.Context) error {
	var errs []error
	for _, k := range h.replicas {
		errs = append(errs, h.stopReplica(k, false))
	}
	return errors.Join(errs...)
}

// startAll starts the replicas that are not running (Lifecycle.StartKueue).
func (h *haCluster) startAll(ctx context.Context) error {
	var errs []error
	for _, k := range h.replicas {
		h.mu.Lock()
		down := h.down[k.replica.name]
		h.mu.Unlock()
		if down {
			errs = append(errs, h.startReplica(ctx, k))
		}
	}
	return errors.Join(errs...)
}

// close stops the probe, every replica and the egress proxy. Nil-safe.
func (h *haCluster) close() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	cancel, done := h.probeCancel, h.probeDone
	h.probeCancel = nil
	h.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	var errs []error
	for _, k := range h.replicas {
		// A replica whose manager exited on its own (a leader that lost the
		// Lease: a pod that would restart) is no teardown failure.
		exited := !k.running()
		if err := k.stop(); err != nil && !exited {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, h.proxy.close())...)
}

// Leader election.

// leaseHolder returns the holder identity of Kueue's leader Lease ("" when
// free or absent).
func (h *haCluster) leaseHolder(ctx context.Context) (string, error) {
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: h.namespace, Name: configapi.DefaultLeaderElectionID}
	if err := h.client.Get(ctx, key, lease); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

// leader returns the replica whose identity holds the Lease ("" when none
// does).
func (h *haCluster) leader(ctx context.Context) (string, error) {
	holder, err := h.leaseHolder(ctx)
	if err != nil {
		return "", fmt.Errorf("cluster %q: Lease %s/%s: %w", h.cluster, h.namespace, configapi.DefaultLeaderElectionID, err)
	}
	for _, k := range h.replicas {
		if id := k.replica.currentIdentity(); id != "" && id == holder {
			return k.replica.name, nil
		}
	}
	return "", nil
}

func (h *haCluster) waitLeader(ctx context.Context, name string, timeout time.Duration) error {
	return poll.Until(ctx, timeout, fmt.Sprintf("cluster %q: replica %s to hold Kueue's leader Lease %s/%s", h.cluster, name, h.namespace, configapi.DefaultLeaderElectionID),
		func(ctx context.Context) error {
			got, err := h.leader(ctx)
			if err != nil {
				return err
			}
			if got != name {
				return fmt.Errorf("the leader is %q", got)
			}
			return nil
		})
}

// Readiness.

// readiness probes every replica: ready when it is not down on purpose and
// its webhook server accepts TLS connections (Kueue's /readyz checks the
// webhook server; the visibility server is not part of it, in Kueue either).
func (h *haCluster) readiness() map[string]bool {
	out := make(map[string]bool, len(h.replicas))
	for _, k := range h.replicas {
		h.mu.Lock()
		down := h.down[k.replica.name]
		h.mu.Unlock()
		out[k.replica.name] = !down && dialTLS(k.webhookPort) == nil
	}
	return out
}

func dialTLS(port int) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe only
	if err != nil {
		return err
	}
	return conn.Close()
}

// probeOnce records the replicas' readiness without writing it.
func (h *haCluster) probeOnce(context.Context) error {
	r := h.readiness()
	h.mu.Lock()
	h.ready = r
	h.mu.Unlock()
	return nil
}

// startProbe probes every ProbePeriod and writes the EndpointSlices when a
// replica's readiness changes.
func (h *haCluster) startProbe() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.mu.Lock()
	h.probeCancel, h.probeDone = cancel, done
	h.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(h.ha.ProbePeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			_ = h.writeEndpoints(ctx, h.readiness()) // retried at the next tick
		}
	}()
}
