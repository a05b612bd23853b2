// Package existing attaches clusters a user already has: a CAPZ spec's CAPI
// ClusterProxy values, a Kueue integration test's envtest rest configs, a
// platform team's kubeconfig files. Kueue must already run on every cluster
// (install it with topology/install if it does not).
//
// Two modes:
//
//   - ModeAdopt: MultiKueue is already set up on the manager. The provider finds
//     the MultiKueue AdmissionCheck, its MultiKueueConfig and
//     MultiKueueClusters, maps each worker to its MultiKueueCluster (by name,
//     else by API server address), and reads Kueue's configuration, quotas
//     and queue names from the clusters. It creates nothing and Close
//     removes nothing.
//
//   - ModeWire: the provider creates the MultiKueue objects with a Connector, as
//     the local provider does, and Close removes exactly what it created.
//
// For example:
//
//	mgr, _ := existing.Kubeconfig("manager", "/path/manager.kubeconfig", "")
//	w1, _ := existing.Kubeconfig("worker-1", "/path/w1.kubeconfig", "")
//	topo, err := existing.New(ctx, topology.Options{}, existing.Options{Manager: mgr, Workers: []existing.Cluster{w1}, Mode: existing.ModeWire})
package existing

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
)

// Cluster is one cluster to attach.
type Cluster struct {
	// Name is the cluster's name in the topology. In adopt mode a worker
	// is renamed after its MultiKueueCluster when it was matched by address.
	Name string
	// Config reaches the API server from the test process (admin rights,
	// or enough to create the MultiKueue objects in wire mode and to watch
	// Workloads, job objects, ClusterQueues and MultiKueueClusters).
	Config *rest.Config
	// Client, when set, is used for reads and writes (CAPI's
	// ClusterProxy.GetClient(), for instance); its scheme must know the
	// types of topology.NewScheme. Default: a client built from Config with
	// that scheme. Watches are always built from Config.
	Client client.Client
	// ManagerServer is this cluster's address as the manager's Kueue reaches
	// it, when it differs from Config.Host (kind: the internal
	// https://<name>-control-plane:6443; in-cluster Services).
	ManagerServer string
}

// Kubeconfig reads a cluster from a kubeconfig file; context "" means the
// file's current context.
func Kubeconfig(name, path, context string) (Cluster, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		where := path
		if context != "" {
			where += " (context " + context + ")"
		}
		return Cluster{}, fmt.Errorf("existing: cluster %q: kubeconfig %s: %w", name, where, err)
	}
	return Cluster{Name: name, Config: cfg}, nil
}

// RESTConfig attaches a cluster by rest config (envtest's Environment.Config,
// for example).
func RESTConfig(name string, cfg *rest.Config) Cluster { return Cluster{Name: name, Config: cfg} }

// ClusterProxy is the part of CAPI's framework.ClusterProxy used here;
// CAPI's type satisfies it without this module importing CAPI.
type ClusterProxy interface {
	GetName() string
	GetRESTConfig() *rest.Config
}

// clientGetter is ClusterProxy.GetClient.
type clientGetter interface{ GetClient() client.Client }

// Proxy attaches a cluster from a CAPI ClusterProxy-shaped value. Its
// GetClient(), when it has one, is not used: CAPI's scheme lacks Kueue's
// types, so a client is built from GetRESTConfig(). Set Cluster.Client to a
// client of your own instead, if you have one with Kueue's types.
func Proxy(p ClusterProxy) Cluster { return Cluster{Name: p.GetName(), Config: p.GetRESTConfig()} }

// Mode says whether MultiKueue is already set up (ModeAdopt) or to be set up
// (ModeWire).
type Mode string

const (
	ModeAdopt Mode = "adopt"
	ModeWire  Mode = "wire"
)

// Options say which clusters to attach and how.
type Options struct {
	Manager Cluster
	Workers []Cluster
	// Mode is ModeAdopt or ModeWire; required.
	Mode Mode
	// AdmissionCheck, in adopt mode, names the MultiKueue AdmissionCheck when
	// the manager has several.
	AdmissionCheck string
	// ConnectTimeout bounds the first contact with each API server. Default
	// 30 seconds.
	ConnectTimeout time.Duration
	// KueueConfiguration is the Configuration the manager's Kueue runs, for
	// a harness that runs Kueue in-process (Kueue's own integration tests),
	// where the cluster has no ConfigMap or Deployment to read it from. When
	// set, the facts (gcInterval, origin, dispatcher, integrations, gates)
	// come from it, with Kueue's defaults for what it leaves out; when nil
	// they are read from the manager, and a fact that can be neither read
	// nor given is marked unknown (topology.KueueFacts.Assumed).
	KueueConfiguration *configapi.Configuration
	// Install, when set, puts Kueue (and JobSet when the integrations
	// enable it) on every cluster before they are attached: install.Step,
	// with Helm from the chart of the chosen version unless its Installer
	// says otherwise, the manager given the connector's needs. Clusters
	// that run Kueue already leave it nil.
	Install *install.Step
}

// New attaches the clusters. topology.Options' ManagerName and WorkerNames
// come from the clusters' names here (a conflicting value is an error); in
// wire mode Quotas, Queues and Connector say what to create (the connector
// defaults to connect.Default, as on every provider, and what it
// needs from Kueue is checked against what the manager runs); Kueue values,
// in either mode, are checked against what the manager runs. Close the
// topology when done.
func New(ctx context.Context, opts topology.Options, o Options) (*topology.Topology, error) {
	if err := o.validate(&opts); err != nil {
		return nil, err
	}
	p := &Provider{opts: o}
	switch o.Mode {
	case ModeAdopt:
		return topology.Adopt(ctx, p, opts, topology.AdoptOptions{AdmissionCheck: o.AdmissionCheck})
	default:
		return topology.New(ctx, p, opts)
	}
}

func (o Options) validate(opts *topology.Options) error {
	switch o.Mode {
	case ModeAdopt, ModeWire:
	case "":
		return errors.New("existing: Options.Mode: empty; use existing.ModeAdopt (MultiKueue already set up) or existing.ModeWire (set it up)")
	default:
		return fmt.Errorf("existing: Options.Mode: %q; use existing.ModeAdopt or existing.ModeWire", o.Mode)
	}
	if len(o.Workers) == 0 {
		return errors.New("existing: Options.Workers: no worker clusters given")
	}
	all := append([]Cluster{o.Manager}, o.Workers...)
	names := make([]string, 0, len(o.Workers))
	for i, c := range all {
		field := "Options.Manager"
		if i > 0 {
			field = fmt.Sprintf("Options.Workers[%d]", i-1)
			names = append(names, c.Name)
		}
		if c.Name == "" {
			return fmt.Errorf("existing: %s.Name: empty", field)
		}
		if c.Config == nil {
			return fmt.Errorf("existing: %s.Config: nil for cluster %q", field, c.Name)
		}
		if c.Config.Host == "" {
			return fmt.Errorf("existing: %s.Config.Host: empty for cluster %q", field, c.Name)
		}
	}
	if opts.ManagerName != "" && opts.ManagerName != o.Manager.Name {
		return fmt.Errorf("existing: topology.Options.ManagerName: %q, but Options.Manager.Name is %q", opts.ManagerName, o.Manager.Name)
	}
	if len(opts.WorkerNames) > 0 && fmt.Sprint(opts.WorkerNames) != fmt.Sprint(names) {
		return fmt.Errorf("existing: topology.Options.WorkerNames: %v, but Options.Workers are named %v", opts.WorkerNames, names)
	}
	opts.ManagerName, opts.WorkerNames, opts.Workers = o.Manager.Name, names, len(names)
	return nil
}

// Provider implements topology.Provider for clusters that exist already.
type Provider struct {
	opts Options
}

// DefaultConnector is connect.Default (topology.ConnectorDefaulter).
func (p *Provider) DefaultConnector() (topology.Connector, error) { return connect.Default() }

var _ topology.ConnectorDefaulter = (*Provider)(nil)

// NewProvider returns the provider for the clusters o names, for providers
// that make clusters and hand them over (topology/capz). Unlike New it does
// not check o against topology.Options: the caller names the clusters in
// topology.Options.ManagerName and WorkerNames itself.
func NewProvider(o Options) *Provider { return &Provider{opts: o} }

// KueueConfiguration implements topology.KueueConfigurationGiver: the
// Configuration given in Options, if any.
func (p *Provider) KueueConfiguration() (*configapi.Configuration, string) {
	if p.opts.KueueConfiguration == nil {
		return nil, ""
	}
	return p.opts.KueueConfiguration, "the Configuration given in existing.Options.KueueConfiguration"
}

var (
	_ topology.Provider      = (*Provider)(nil)
	_ topology.ClusterKeeper = (*Provider)(nil)
)

// Name implements topology.Provider.
func (*Provider) Name() string { return "existing" }

// KeepsClusters implements topology.ClusterKeeper: the clusters outlive the
// topology, so Close removes only what the topology created.
func (*Provider) KeepsClusters() bool { return true }

// Provision implements topology.Provider: it builds the clients, checks that
// each API server answers and that Kueue's CRDs are there.
func (p *Provider) Provision(ctx context.Context, spec topology.Spec) (*topology.Cluster, []*topology.Cluster, error) {
	scheme, err := topology.NewScheme()
	if err != nil {
		return nil, nil, err
	}
	timeout := p.opts.ConnectTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	all := append([]Cluster{p.opts.Manager}, p.opts.Workers...)
	if st := p.opts.Install; st != nil {
		cs := make([]*topology.Cluster, len(all))
		for i, c := range all {
			cs[i] = &topology.Cluster{Name: c.Name, Config: rest.CopyConfig(c.Config)}
		}
		fmt.Fprintf(spec.Progress, "existing: installing Kueue on %d clusters\n", len(all))
		if err := st.Run(ctx, spec, cs, spec.Progress); err != nil {
			return nil, nil, fmt.Errorf("existing: %w", err)
		}
	}
	out := make([]*topology.Cluster, len(all))
	for i, src := range all {
		role := topology.RoleWorker
		if i == 0 {
			role = topology.RoleManager
		}
		c, err := attach(ctx, src, role, scheme, timeout)
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(spec.Progress, "existing: attached %s cluster %q at %s\n", role, c.Name, c.Config.Host)
		out[i] = c
	}
	return out[0], out[1:], nil
}

func attach(ctx context.Context, src Cluster, role topology.Role, scheme *runtime.Scheme, timeout time.Duration) (*topology.Cluster, error) {
	cfg := rest.CopyConfig(src.Config)
	cl := src.Client
	if cl == nil {
		httpClient, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("existing: cluster %q: %w", src.Name, err)
		}
		mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
		if err != nil {
			return nil, fmt.Errorf("existing: cluster %q: %w", src.Name, err)
		}
		if cl, err = client.New(cfg, client.Options{Scheme: scheme, HTTPClient: httpClient, Mapper: mapper}); err != nil {
			return nil, fmt.Errorf("existing: cluster %q: %w", src.Name, err)
		}
	}
	c := &topology.Cluster{Name: src.Name, Role: role, Config: cfg, Client: cl, ManagerServer: src.ManagerServer}
	// Kueue's CRDs answer: the API server is reachable and Kueue installed.
	probe := client.ObjectList(&kueue.WorkloadList{})
	if role == topology.RoleManager {
		probe = &kueue.MultiKueueClusterList{}
	}
	err := poll.Until(ctx, timeout, fmt.Sprintf("cluster %q at %s to answer", src.Name, cfg.Host), func(ctx context.Context) error {
		err := cl.List(ctx, probe, client.Limit(1))
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return poll.Stop(fmt.Errorf("existing: cluster %q: Kueue's CRDs are not installed (%v); install Kueue first, or give existing.Options.Install", src.Name, err))
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("existing: %w", err)
	}
	return c, nil
}

// Close implements topology.Provider: there is nothing of its own to stop;
// the topology has already removed what it created.
func (*Provider) Close(context.Context) error { return nil }
