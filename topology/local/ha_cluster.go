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
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// haCluster runs one cluster's Kueue as several replicas: the replicas
// (Kueue processes), the egress proxy that is their network as the API
// server sees it, the Services and EndpointSlices through which the API
// server reaches them, and the stand-in for the kubelet's readiness probe and
// the EndpointSlice controller (probe).
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
	replicas  []*replica
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

// start makes the replicas (Kueue processes kueue-0, kueue-1, ... with a
// certificate for the Services' names, each dialling its API server through
// a forwarder of its own), starts kueue-0 and waits until it leads, starts
// the others, then registers the Services, their endpoints, the webhooks and
// the visibility APIServices, and waits until the APIServices are Available.
func (h *haCluster) start(ctx context.Context, c *topology.Cluster, lc *localCluster, kb *binaryKueue, hooks webhookConfigs, o Options) error {
	h.namespace = kb.namespace
	if h.namespace == "" {
		h.namespace = topology.DefaultKueueNamespace
	}
	h.caPEM = h.cp.ca.certPEM
	var err error
	if h.client, err = client.New(h.cp.configAs(h.cp.agent), client.Options{}); err != nil {
		return err
	}
	if h.services, err = loadHAServices(kb.bin.SourceDir, h.namespace); err != nil {
		return fmt.Errorf("cluster %q: %w", h.cluster, err)
	}
	// The Lease lives in Kueue's namespace.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c.Client, ns, func() error { return nil }); err != nil {
		return fmt.Errorf("cluster %q: create Namespace %s: %w", h.cluster, h.namespace, err)
	}
	serving, err := h.cp.ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kueue-replicas"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost", h.services.webhook.dnsName(), h.services.visibility.dnsName()},
	})
	if err != nil {
		return fmt.Errorf("cluster %q: replicas' certificate: %w", h.cluster, err)
	}
	le := h.ha.leaderElection(h.namespace)
	for i := range h.ha.Replicas {
		r := &replica{cluster: h.cluster, name: replicaName(i)}
		if r.api, err = newForwarder(h.cp.apiPort); err != nil {
			return err
		}
		h.replicas = append(h.replicas, r) // close closes its forwarders from here on
		if r.bin, err = lc.newKueueBinary(kb, o, kueueProcessFiles{
			name: r.name, hostname: r.name, serving: &serving, apiServer: r.api.url(), leaderElection: le,
		}); err != nil {
			return err
		}
		if r.vis, err = newForwarder(r.bin.visibilityPort); err != nil {
			return err
		}
		h.proxy.route(podAddress(i, h.services.webhookTargetPort), r.bin.webhookPort)
		h.proxy.route(podAddress(i, h.services.visibilityTargetPort), r.vis.port())
		r.bin.portsChanged = func() {
			// A start that lost a port race took new ports: the pod address
			// and the visibility forwarder lead to them.
			h.proxy.route(podAddress(i, h.services.webhookTargetPort), r.bin.webhookPort)
			r.vis.setTarget(r.bin.visibilityPort)
		}
	}
	// kueue-0 first, so that the leader at start is known.
	if err := h.startReplica(ctx, h.replicas[0]); err != nil {
		return err
	}
	if h.replicas[0].bin.reported, err = reportedVersion(h.replicas[0].bin.proc.logPath); err != nil {
		return fmt.Errorf("cluster %q: %w", h.cluster, err)
	}
	if err := h.waitLeader(ctx, h.replicas[0].name, h.ha.LeaseDuration+h.timeout()); err != nil {
		return err
	}
	errs := make([]error, len(h.replicas))
	var wg sync.WaitGroup
	for i, r := range h.replicas[1:] {
		wg.Go(func() { errs[i] = h.startReplica(ctx, r) })
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

// first is kueue-0, whose configuration and reported version the topology
// publishes.
func (h *haCluster) first() *kueueBinary { return h.replicas[0].bin }

func (h *haCluster) timeout() time.Duration { return h.cp.timeout }

// startReplica starts r (its forwarders restored) and waits until it is
// ready and its visibility server answers /readyz through its forwarder.
func (h *haCluster) startReplica(ctx context.Context, r *replica) error {
	r.api.setCut(false)
	r.vis.setCut(false)
	r.mu.Lock()
	r.startedAt = time.Now()
	r.identity = ""
	r.mu.Unlock()
	if err := r.bin.start(ctx); err != nil {
		return fmt.Errorf("replica %s: %w", r.name, err)
	}
	hc := h.directClient()
	defer hc.CloseIdleConnections()
	u := r.vis.url() + "/readyz"
	if err := poll.Until(ctx, h.timeout(), fmt.Sprintf("cluster %q: replica %s's visibility server to answer %s", h.cluster, r.name, u),
		func(context.Context) error { return getOK(hc, u) }); err != nil {
		return err
	}
	h.mu.Lock()
	delete(h.down, r.name)
	delete(h.terminating, r.name)
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

// replicaGrace is how long a replica stopped gracefully has between SIGTERM
// and SIGKILL (a pod's terminationGracePeriodSeconds is 30 s by default;
// Kueue's shutdown takes well under that).
const replicaGrace = 30 * time.Second

// stopReplica stops one replica. Gracefully (kill false), as a pod deleted
// with SIGTERM: its endpoints turn terminating at once and Kueue shuts down
// in order and releases the Lease if it leads (Kueue's config.Load sets
// LeaderElectionReleaseOnCancel). Killed (kill true), as a crashed process:
// SIGKILL, so it releases nothing and writes nothing more, to its own API
// server or the workers; its endpoints stay ready until the readiness probe
// fails.
func (h *haCluster) stopReplica(r *replica, kill bool) error {
	h.mu.Lock()
	h.down[r.name] = true
	if !kill {
		h.terminating[r.name] = true
	}
	h.mu.Unlock()
	if kill {
		return r.bin.stop()
	}
	if err := h.writeEndpoints(context.Background(), h.readiness()); err != nil {
		return err
	}
	return r.bin.terminate(replicaGrace)
}

func (h *haCluster) replica(name string) (*replica, error) {
	for _, r := range h.replicas {
		if r.name == name {
			return r, nil
		}
	}
	names := make([]string, len(h.replicas))
	for i, r := range h.replicas {
		names[i] = r.name
	}
	return nil, fmt.Errorf("cluster %q has no Kueue replica %q (it has %v)", h.cluster, name, names)
}

// stopAll stops every replica gracefully (Lifecycle.StopKueue).
func (h *haCluster) stopAll(context.Context) error {
	var errs []error
	for _, r := range h.replicas {
		errs = append(errs, h.stopReplica(r, false))
	}
	return errors.Join(errs...)
}

// startAll starts the replicas that are not running (Lifecycle.StartKueue).
func (h *haCluster) startAll(ctx context.Context) error {
	var errs []error
	for _, r := range h.replicas {
		if !r.bin.running() {
			errs = append(errs, h.startReplica(ctx, r))
		}
	}
	return errors.Join(errs...)
}

// close stops the probe, every replica, their forwarders and the egress
// proxy. Nil-safe.
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
	for _, r := range h.replicas {
		if r.bin != nil {
			errs = append(errs, r.bin.stop())
		}
		errs = append(errs, r.api.close(), r.vis.close())
	}
	return errors.Join(append(errs, h.proxy.close())...)
}

// Leader election.

// lease returns Kueue's leader Lease (nil when absent).
func (h *haCluster) lease(ctx context.Context) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: h.namespace, Name: kueueLeaderElectionID}
	if err := h.client.Get(ctx, key, lease); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("cluster %q: Lease %s/%s: %w", h.cluster, h.namespace, kueueLeaderElectionID, err)
	}
	return lease, nil
}

// leader returns the replica whose current start holds the Lease ("" when
// none does): the holder identity starts with its host name and was
// acquired after the replica started (a holder written by its previous
// start, before a kill, is not its current identity).
func (h *haCluster) leader(ctx context.Context) (string, error) {
	lease, err := h.lease(ctx)
	if err != nil || lease == nil {
		return "", err
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	r, err := h.replica(replicaOfHolder(holder))
	if holder == "" || err != nil {
		return "", nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.identity == holder {
		return r.name, nil
	}
	if lease.Spec.AcquireTime == nil || lease.Spec.AcquireTime.Time.Before(r.startedAt) {
		return "", nil
	}
	r.identity = holder
	return r.name, nil
}

func (h *haCluster) waitLeader(ctx context.Context, name string, timeout time.Duration) error {
	return poll.Until(ctx, timeout, fmt.Sprintf("cluster %q: replica %s to hold Kueue's leader Lease %s/%s", h.cluster, name, h.namespace, kueueLeaderElectionID),
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
	for _, r := range h.replicas {
		h.mu.Lock()
		down := h.down[r.name]
		h.mu.Unlock()
		out[r.name] = !down && dialTLS(r.bin.webhookPort) == nil
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
