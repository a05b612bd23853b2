package topology

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Provider brings up the clusters of a topology: the embedded local provider,
// kind, existing clusters, CAPZ.
type Provider interface {
	// Name identifies the provider in reports ("local", "existing", ...).
	Name() string
	// Provision returns the manager and the workers (in spec.WorkerNames
	// order), each reachable and running Kueue.
	Provision(ctx context.Context, spec Spec) (manager *Cluster, workers []*Cluster, err error)
	// Close tears down what Provision created. It must be safe after a failed
	// or partial Provision and when called more than once.
	Close(ctx context.Context) error
}

// Connector attaches one worker to the manager and says how the manager's
// MultiKueueCluster reaches it. Implementations live in package connect.
type Connector interface {
	// Name identifies the connector in reports ("kubeconfig-secret", ...).
	Name() string
	// KueueNeeds says what the manager's Kueue must have before it starts
	// (CRDs, feature gates, configuration) for this connector to work.
	// Providers call it before they start or install Kueue.
	KueueNeeds(ctx context.Context) (KueueNeeds, error)
	// Connect prepares credentials on the worker and whatever the manager
	// needs to use them, and returns the MultiKueueCluster clusterSource.
	Connect(ctx context.Context, req ConnectRequest) (kueue.ClusterSource, error)
}

// ConnectRequest is what a Connector gets to attach one worker.
type ConnectRequest struct {
	Manager *Cluster
	Worker  *Cluster
	// KueueNamespace is where Kueue runs on the manager (Secrets and
	// ClusterProfiles must live there).
	KueueNamespace string
	// Integrations are the Kueue framework names in use; connectors grant
	// access to exactly their job resources.
	Integrations []string
}

// Topology is one manager cluster and N worker clusters wired together with
// MultiKueue. Create one with a provider's constructor (for example
// local.New) and Close it when done.
type Topology struct {
	Manager *Cluster
	Workers []*Cluster
	// Spec is the resolved configuration. Its Kueue settings (namespace,
	// origin, dispatcher, gcInterval, workerLostTimeout, integrations, feature
	// gates) are the ones read from the manager (Facts) when the cluster shows
	// them; in adopt mode its names (workers, queues, checks) are the objects
	// found there.
	Spec Spec
	// Facts is Kueue's configuration as read from the manager, and where it
	// was read.
	Facts KueueFacts
	// ProviderName and ConnectorName say how the topology was made.
	ProviderName  string
	ConnectorName string

	provider  Provider
	created   []createdObject // deleted on Close when the provider keeps its clusters
	closeOnce sync.Once
	closeErr  error
}

// Provider returns the provider that made the topology; providers offer
// extras through their own types (local.Provider.Dir, for example).
func (t *Topology) Provider() Provider { return t.provider }

// Clusters returns the manager followed by the workers.
func (t *Topology) Clusters() []*Cluster {
	return append([]*Cluster{t.Manager}, t.Workers...)
}

// Cluster returns the cluster with the given name, or nil.
func (t *Topology) Cluster(name string) *Cluster {
	for _, c := range t.Clusters() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Worker returns the worker with the given name, or nil.
func (t *Topology) Worker(name string) *Cluster {
	for _, c := range t.Workers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// New provisions the clusters with provider, connects every worker to the
// manager, creates the MultiKueue objects and waits until they are Active.
// On any error everything provisioned so far is torn down.
func New(ctx context.Context, provider Provider, opts Options) (*Topology, error) {
	if provider == nil {
		return nil, errors.New("topology: provider is nil")
	}
	// The clients and caches that wire and watch the clusters log through
	// controller-runtime's global logger; left unset, controller-runtime
	// prints a stack trace after 30 s (seen on kind). A logger the caller
	// set is kept.
	if !ctrllog.Log.Enabled() {
		ctrllog.SetLogger(logr.Discard())
	}
	if opts.Connector == nil {
		d, ok := provider.(ConnectorDefaulter)
		if !ok {
			return nil, fmt.Errorf("topology: Options.Connector: nil, and provider %s picks no default (it is no ConnectorDefaulter); use connect.KubeconfigSecret or connect.ClusterProfile", provider.Name())
		}
		c, err := d.DefaultConnector()
		if err != nil {
			return nil, fmt.Errorf("topology: Options.Connector: nil, and provider %s's default: %w", provider.Name(), err)
		}
		if c == nil {
			return nil, fmt.Errorf("topology: Options.Connector: nil, and provider %s's default is nil too", provider.Name())
		}
		opts.Connector = c
	}
	spec, err := opts.Resolve()
	if err != nil {
		return nil, err
	}
	t := &Topology{Spec: spec, provider: provider, ProviderName: provider.Name(), ConnectorName: spec.Connector.Name()}
	mgr, workers, err := provider.Provision(ctx, spec)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("topology: provider %s: %w", provider.Name(), err), t.Close(context.WithoutCancel(ctx)))
	}
	t.Manager, t.Workers = mgr, workers
	read, err := t.learnFacts(ctx, opts)
	if err == nil {
		var needs KueueNeeds
		if needs, err = spec.Connector.KueueNeeds(ctx); err == nil {
			err = t.checkNeeds(needs, read)
		}
	}
	if err != nil {
		return nil, errors.Join(err, t.Close(context.WithoutCancel(ctx)))
	}
	if err := t.recording(func() error { return t.setupMultiKueue(ctx) }); err != nil {
		return nil, errors.Join(err, t.Close(context.WithoutCancel(ctx)))
	}
	return t, nil
}

// Close tears the topology down. It is idempotent and safe to defer or
// register with t.Cleanup.
func (t *Topology) Close(ctx context.Context) error {
	t.closeOnce.Do(func() {
		var errs []error
		if k, ok := t.provider.(ClusterKeeper); ok && k.KeepsClusters() {
			errs = append(errs, t.deleteCreated(ctx))
		}
		if t.provider != nil {
			errs = append(errs, t.provider.Close(ctx))
		}
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}

// Cleanup is the part of testing.TB that CloseWith needs.
type Cleanup interface {
	Cleanup(func())
	Errorf(format string, args ...any)
}

// CloseWith registers Close with tb.Cleanup; it runs after the test passes,
// fails or panics. A teardown error fails the test.
func (t *Topology) CloseWith(tb Cleanup) {
	tb.Cleanup(func() {
		if err := t.Close(context.Background()); err != nil {
			tb.Errorf("topology teardown: %v", err)
		}
	})
}
