package topology

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
)

// Capabilities: what a Provider may offer beyond the Provider interface.
// Each is a small interface a provider implements (with a compile-time
// check, var _ topology.X = (*Provider)(nil)) and the packages above ask
// for with a type assertion on Topology.Provider(); a provider without one
// gets the documented fallback, never an error. A provider author reads
// this file to see what there is to implement.

// ConnectorDefaulter is a Provider that picks the connector when
// Options.Connector is nil: New asks it before anything is provisioned.
// Every provider of this module answers connect.Default, so the policy is
// decided in one function; without it a nil connector is an error naming
// Options.Connector.
type ConnectorDefaulter interface {
	DefaultConnector() (Connector, error)
}

// TimeoutSuggester is a Provider that knows its substrate's pace
// (Topology.Timeouts): kind and AKS take minutes where the local topology
// takes seconds. Without it the local topology's defaults apply.
type TimeoutSuggester interface {
	SuggestedTimeouts() Timeouts
}

// ClusterKeeper is implemented by providers whose clusters outlive the
// topology (existing clusters, kind clusters kept for reuse). Close then
// deletes exactly the objects the topology and its connector created on them,
// newest first, before the provider's own Close.
type ClusterKeeper interface {
	KeepsClusters() bool
}

// KueueConfigurationGiver is a Provider that knows the Configuration the
// manager's Kueue runs without reading it from the cluster: a harness that
// runs Kueue in-process, with no ConfigMap or Deployment to read, hands its
// Configuration object over (existing.Options.KueueConfiguration). New and
// Adopt then take the facts from it.
type KueueConfigurationGiver interface {
	// KueueConfiguration returns the Configuration, or nil when there is
	// none to give, and where it came from, for reports.
	KueueConfiguration() (cfg *configapi.Configuration, source string)
}

// ClusterDirs is implemented by providers that keep each cluster's files
// in Dir()/<cluster> (local.Provider).
type ClusterDirs interface {
	Dir() string
}

// ReplicaVisibility is implemented by providers that run several replicas
// of a cluster's Kueue and can reach each one's visibility server directly,
// not through the API server's routing (the local provider in HA mode:
// local.Provider.VisibilityConfigs). The map is replica name → a rest.Config
// whose Host is that replica's visibility server.
type ReplicaVisibility interface {
	VisibilityConfigs(cluster string) (map[string]*rest.Config, error)
}

// ReplicaKiller is implemented by providers that can kill one replica of a
// cluster's Kueue (local.Provider in HA mode); scenario.Failover uses it to kill the
// leader, and stops it by other means without one.
type ReplicaKiller interface {
	KillReplica(ctx context.Context, cluster, replica string) error
}

// Audit: a provider that can read its clusters' API server audit logs
// implements AuditProvider (the local provider does); observe.Observer's
// Attribute then matches every recorded event to the write that caused it.

// RefusalSource is implemented by an AuditSource that also keeps the writes
// the API server refused (403 Forbidden, 422 Invalid): they change nothing,
// so no watch shows them, yet they are often why a workload is stuck.
type RefusalSource interface {
	// Refused returns the refused writes whose request was received at or
	// after since, in the order the API server answered them.
	Refused(ctx context.Context, since time.Time) ([]AuditWrite, error)
}

// AuditSource gives one cluster's audited writes.
type AuditSource interface {
	// Writes returns the successful (2xx) writes whose request was received
	// at or after since, in the order the API server completed them.
	Writes(ctx context.Context, since time.Time) ([]AuditWrite, error)
}

// AuditProvider is implemented by a topology.Provider that can read its
// clusters' audit logs. AuditSource returns nil for a cluster without one.
type AuditProvider interface {
	AuditSource(cluster string) AuditSource
}

// AuditWrite is one write an API server completed, as its audit log records
// it at the Metadata level (no request or response bodies).
type AuditWrite struct {
	// Received is the requestReceivedTimestamp, Completed the stageTimestamp
	// of the ResponseComplete stage.
	Received, Completed time.Time
	Verb                string
	Resource            schema.GroupResource
	Subresource         string
	Namespace, Name     string
	// UID of the object when the request carried one (updates); empty for
	// creates, patches and deletes.
	UID       types.UID
	Code      int32
	User      string
	UserAgent string
	// Role is what the source knows User to be (a provider knows its own
	// identities); empty when it does not.
	Role WriterRole
	// RefusedBy and Message are set on a refused write (RefusalSource):
	// what refused it (RBAC, a ValidatingAdmissionPolicy or an admission
	// webhook by name, or the API server) and the API server's answer.
	RefusedBy, Message string
}

// WriterRole is the part of a MultiKueue setup that made a change.
type WriterRole string

const (
	// WriterTest is the test itself (and the topology's setup): the admin
	// credentials of topology.Cluster.Config.
	WriterTest WriterRole = "test"
	// WriterKueue is the cluster's own Kueue (on the manager that includes
	// MultiKueue's controllers writing manager objects).
	WriterKueue WriterRole = "Kueue"
	// WriterMultiKueue is the manager's MultiKueue acting on a worker with the
	// credentials its MultiKueueCluster names.
	WriterMultiKueue WriterRole = "MultiKueue"
	// WriterAgent is the local topology's own clients in a cluster (the Ray
	// dashboard stand-in, the HA readiness probe).
	WriterAgent WriterRole = "agent"
)
