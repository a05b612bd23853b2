package topology

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Role of a cluster in a topology.
type Role string

const (
	RoleManager Role = "manager"
	RoleWorker  Role = "worker"
)

// Cluster is one Kubernetes cluster of a topology: a name, a REST config, a
// typed client and the admin kubeconfig. Its String form never contains
// credentials.
type Cluster struct {
	// Name is the cluster's name in the topology; for a worker it is also the
	// MultiKueueCluster name on the manager.
	Name string
	Role Role
	// Config reaches the API server with admin rights, from the test
	// process. Watches (the Observer's informers) are built from it.
	Config *rest.Config
	// ManagerServer is this cluster's API server address as the manager's
	// Kueue reaches it, when that differs from Config.Host: a kind worker seen
	// from the manager's pods (https://<name>-control-plane:6443), an
	// in-cluster Service. Empty means Config.Host. Connectors write
	// ServerForManager into the credentials they hand to Kueue.
	ManagerServer string
	// Client reads and writes with the types of NewScheme (core, batch, Kueue,
	// JobSet, Ray, ClusterProfile). Any client.Client works, for example CAPI's
	// ClusterProxy.GetClient() when its scheme knows those types.
	Client client.Client
	// Kubeconfig is the admin kubeconfig. It prints as "[redacted]".
	Kubeconfig Secret
	// Lifecycle controls the cluster's processes; nil when the provider cannot
	// stop and start them (existing clusters, for instance).
	Lifecycle Lifecycle
}

// ServerForManager is the address the manager's Kueue uses to reach this
// cluster's API server: ManagerServer, else Config.Host.
func (c *Cluster) ServerForManager() string {
	if c.ManagerServer != "" {
		return c.ManagerServer
	}
	return c.Config.Host
}

func (c *Cluster) String() string { return fmt.Sprintf("%s cluster %q", c.Role, c.Name) }

// Lifecycle stops and starts a cluster's parts, to simulate outages.
type Lifecycle interface {
	// StopKueue stops the cluster's Kueue controllers and webhooks.
	StopKueue(ctx context.Context) error
	// StartKueue starts them again.
	StartKueue(ctx context.Context) error
	// StopAPIServer stops the cluster's kube-apiserver (etcd keeps the data).
	StopAPIServer(ctx context.Context) error
	// StartAPIServer starts it again on the same address.
	StartAPIServer(ctx context.Context) error
}

// Secret is credential material (a kubeconfig, a token). Formatting it with
// any verb prints "[redacted]"; use the bytes directly where they are needed.
type Secret []byte

// Format implements fmt.Formatter so that %v, %s, %q, %x and %#v all redact.
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("[redacted]")) }

// String implements fmt.Stringer.
func (Secret) String() string { return "[redacted]" }

// MarshalJSON keeps secrets out of JSON reports.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }
