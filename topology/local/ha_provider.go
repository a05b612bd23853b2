package local

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"k8s.io/client-go/rest"

	"github.com/multikueue-testkit/testkit/topology"
)

// Replica is one replica of an HA cluster's Kueue (see HA), as
// Provider.Replicas reports it.
type Replica struct {
	// Cluster and Name ("kueue-0", "kueue-1", ...) name the replica. Name
	// is also what its Lease holder identity starts with, as a pod's name
	// starts a deployed Kueue's.
	Cluster, Name string
	// Identity is the holder identity the replica writes into Kueue's
	// leader Lease while it leads: "<Name>_<uuid>" (its host name is its
	// Name), new at every start; "" until this start has been seen leading
	// (LeaderReplica).
	Identity string
	// Running is false once StopReplica or KillReplica stopped it (until
	// StartReplica or Lifecycle.StartKueue), or once its manager exited on
	// its own (a partitioned leader that lost the Lease).
	Running bool
	// Ready is its endpoint's readiness as last written to the Services'
	// EndpointSlices.
	Ready bool
	// Visibility reaches this replica's visibility server directly
	// (https://127.0.0.1:<port> of the forwarder in front of it, the
	// cluster's CA, admin credentials), not through the API server: with it
	// a test asks each replica itself.
	Visibility *rest.Config
	// WebhookURL is its webhook server (https://127.0.0.1:<port>), whose
	// certificate the cluster's CA signs; WebhookCA is that CA.
	WebhookURL string
	WebhookCA  []byte
	// Egress counts the API server's connections to the replica through the
	// webhook Service and the visibility Service (see EgressStats).
	WebhookEgress, VisibilityEgress EgressStats
}

// ReplicasOf returns the Kueue replicas of a cluster of topo, when topo was
// made by the local provider in HA mode.
func ReplicasOf(topo *topology.Topology, cluster string) ([]Replica, error) {
	p, ok := topo.Provider().(*Provider)
	if !ok {
		return nil, fmt.Errorf("local: the topology was made by provider %q, not the local one", topo.ProviderName)
	}
	return p.Replicas(cluster)
}

// Replicas returns the Kueue replicas of cluster, in name order. It is an
// error when the cluster does not run Kueue in HA mode.
func (p *Provider) Replicas(cluster string) ([]Replica, error) {
	h, err := p.haCluster(cluster)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Replica, 0, len(h.replicas))
	for i, r := range h.replicas {
		out = append(out, Replica{
			Cluster:          h.cluster,
			Name:             r.name,
			Identity:         r.currentIdentity(),
			Running:          !h.down[r.name] && r.bin.running(),
			Ready:            h.ready[r.name],
			Visibility:       h.visibilityConfig(r),
			WebhookURL:       "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(r.bin.webhookPort)),
			WebhookCA:        append([]byte(nil), h.caPEM...),
			WebhookEgress:    h.proxy.statsFor(podAddress(i, h.services.webhookTargetPort)),
			VisibilityEgress: h.proxy.statsFor(podAddress(i, h.services.visibilityTargetPort)),
		})
	}
	return out, nil
}

// VisibilityConfigs maps each Kueue replica of cluster to a rest.Config
// reaching its visibility server directly (assert.Checker.PendingVisible
// asks each replica with it).
func (p *Provider) VisibilityConfigs(cluster string) (map[string]*rest.Config, error) {
	rs, err := p.Replicas(cluster)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*rest.Config, len(rs))
	for _, r := range rs {
		out[r.Name] = r.Visibility
	}
	return out, nil
}

func (h *haCluster) visibilityConfig(r *replica) *rest.Config {
	cfg := h.cp.restConfig()
	cfg.Host = r.vis.url()
	return cfg
}

// LeaderReplica returns the replica of cluster whose identity holds Kueue's
// leader Lease, or "" when none does (between a leader's death and its
// successor's election).
func (p *Provider) LeaderReplica(ctx context.Context, cluster string) (string, error) {
	h, err := p.haCluster(cluster)
	if err != nil {
		return "", err
	}
	return h.leader(ctx)
}

// StopReplica stops one replica as a pod deleted with SIGTERM stops: its
// endpoints turn terminating, the process gets SIGTERM (SIGKILL 30 s later)
// and shuts down (webhooks, visibility, controllers) and, if it leads,
// releases the Lease, so another replica takes over within a RetryPeriod.
func (p *Provider) StopReplica(_ context.Context, cluster, name string) error {
	h, r, err := p.haReplica(cluster, name)
	if err != nil {
		return err
	}
	return h.stopReplica(r, false)
}

// KillReplica SIGKILLs one replica, as a crashed process or a node lost:
// it releases nothing and writes nothing on its way out; its webhook and
// visibility servers close; its endpoints stay ready until the readiness
// probe fails (within HA.ProbePeriod). If it led, another replica takes over
// once the Lease expires (about LeaseDuration).
func (p *Provider) KillReplica(_ context.Context, cluster, name string) error {
	h, r, err := p.haReplica(cluster, name)
	if err != nil {
		return err
	}
	return h.stopReplica(r, true)
}

// StartReplica starts a stopped or killed replica again (a new identity; it
// follows until it wins the Lease).
func (p *Provider) StartReplica(ctx context.Context, cluster, name string) error {
	h, r, err := p.haReplica(cluster, name)
	if err != nil {
		return err
	}
	return h.startReplica(ctx, r)
}

// StopVisibility makes only the visibility server of one replica
// unreachable (the forwarder in front of it closes every connection, from
// the API server and from Replica.Visibility alike), leaving the process,
// its webhooks and its endpoint ready: a replica whose visibility handler is
// broken, for tests. Starting the replica again after StopReplica brings it
// back.
func (p *Provider) StopVisibility(_ context.Context, cluster, name string) error {
	_, r, err := p.haReplica(cluster, name)
	if err != nil {
		return err
	}
	r.vis.setCut(true)
	return nil
}

// PartitionReplica cuts one replica's network to its API server (the
// forwarder it dials closes every connection and refuses new ones) and
// leaves it running (heal with HealReplica): its caches and queues stop
// following the cluster, while its webhook and visibility servers keep
// answering from stale state (the visibility server authorizes through the
// same cut network: cached decisions only, as a real partitioned pod). A
// partitioned leader cannot renew the Lease: Kueue exits after
// RenewDeadline, and another replica takes over. MultiKueue's connections to
// the workers are not cut.
func (p *Provider) PartitionReplica(_ context.Context, cluster, name string) error {
	_, r, err := p.haReplica(cluster, name)
	if err != nil {
		return err
	}
	r.api.setCut(true)
	return nil
}

// HealReplica ends PartitionReplica: the replica reaches its API server again
// and its informers catch up.
func (p *Provider) HealReplica(_ context.Context, cluster, name string) error {
	_, r, err := p.haReplica(cluster, name)
	if err != nil {
		return err
	}
	r.api.setCut(false)
	return nil
}

func (p *Provider) haCluster(cluster string) (*haCluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, lc := range p.clusters {
		if lc.name != cluster {
			continue
		}
		if lc.ha == nil || len(lc.ha.replicas) == 0 {
			return nil, fmt.Errorf("local: cluster %q does not run Kueue in HA mode (local.Options.HA)", cluster)
		}
		return lc.ha, nil
	}
	return nil, fmt.Errorf("local: no cluster %q", cluster)
}

func (p *Provider) haReplica(cluster, name string) (*haCluster, *replica, error) {
	h, err := p.haCluster(cluster)
	if err != nil {
		return nil, nil, err
	}
	r, err := h.replica(name)
	return h, r, err
}
