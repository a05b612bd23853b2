package capz

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/install"
)

// AttachOptions choose CAPI Clusters that exist on a management cluster, to
// attach with topology/existing. Kueue must run on them already (install it
// with topology/install first if it does not; Select gives the clusters).
type AttachOptions struct {
	// Management is the CAPI management cluster: in a CAPZ e2e spec,
	// existing.Proxy(bootstrapClusterProxy). Required.
	Management existing.Cluster
	// Namespace of the Clusters; default "default".
	Namespace string
	// Manager names the manager's Cluster. Required.
	Manager string
	// Workers name the workers' Clusters, in this order; or
	Workers []string
	// WorkerSelector is a label selector on the Clusters of Namespace
	// ("multikueue-testkit/role=worker,multikueue-testkit/manager=mk"); the
	// matches, manager excluded, sorted by name, are the workers.
	WorkerSelector string
	// Mode is existing.ModeAdopt (default: MultiKueue is set up already) or
	// existing.ModeWire.
	Mode existing.Mode
	// AdmissionCheck, in adopt mode, names the MultiKueue AdmissionCheck when
	// the manager has several.
	AdmissionCheck string
	// ConnectTimeout bounds the first contact with each API server; default
	// 30 seconds.
	ConnectTimeout time.Duration
	// Install, when set, puts Kueue on the Clusters before they are
	// attached (existing.Options.Install): for Clusters a spec made
	// without Kueue.
	Install *install.Step
}

// Attach attaches the Clusters o selects: Select, then existing.New. Each
// cluster's name in the topology is its Cluster's name (in adopt mode a
// worker may be renamed after its MultiKueueCluster, see existing.ModeAdopt).
// The zero fields of opts.Timeouts take AKSTimeouts.
func Attach(ctx context.Context, opts topology.Options, o AttachOptions) (*topology.Topology, error) {
	eo, err := Select(ctx, o)
	if err != nil {
		return nil, err
	}
	aks := AKSTimeouts()
	opts.Timeouts.Progress = cmp.Or(opts.Timeouts.Progress, aks.Progress)
	opts.Timeouts.Start = cmp.Or(opts.Timeouts.Start, aks.Start)
	return existing.New(ctx, opts, eo)
}

// Select reads the kubeconfig Secrets ("<cluster>-kubeconfig", key "value")
// of the Clusters o names or selects and returns them as existing.Options.
// Errors name the Cluster or Secret missing and, for a selector, the
// Clusters there are.
func Select(ctx context.Context, o AttachOptions) (existing.Options, error) {
	if err := checkManagement(o.Management, "AttachOptions.Management"); err != nil {
		return existing.Options{}, err
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Mode == "" {
		o.Mode = existing.ModeAdopt
	}
	if o.Manager == "" {
		return existing.Options{}, errors.New("capz: AttachOptions.Manager: empty; name the manager's Cluster")
	}
	switch {
	case len(o.Workers) == 0 && o.WorkerSelector == "":
		return existing.Options{}, errors.New("capz: AttachOptions.Workers: none given, and no WorkerSelector")
	case len(o.Workers) > 0 && o.WorkerSelector != "":
		return existing.Options{}, errors.New("capz: AttachOptions.Workers and WorkerSelector: both given; use one")
	}
	c, err := managementClient(o.Management, "AttachOptions.Management")
	if err != nil {
		return existing.Options{}, err
	}
	mgmtName := o.Management.Name
	workers := slices.Clone(o.Workers)
	if o.WorkerSelector != "" {
		sel, err := labels.Parse(o.WorkerSelector)
		if err != nil {
			return existing.Options{}, fmt.Errorf("capz: AttachOptions.WorkerSelector: %q: %v", o.WorkerSelector, err)
		}
		matched, err := clusterNames(ctx, c, o.Namespace, sel)
		if err != nil {
			return existing.Options{}, fmt.Errorf("capz: management cluster %q: list Clusters in %s: %w", mgmtName, o.Namespace, err)
		}
		workers = slices.DeleteFunc(matched, func(n string) bool { return n == o.Manager })
		if len(workers) == 0 {
			all, _ := clusterNames(ctx, c, o.Namespace, nil)
			return existing.Options{}, fmt.Errorf("capz: AttachOptions.WorkerSelector: %q matches no worker Cluster in %s on management cluster %q (it has %v)", o.WorkerSelector, o.Namespace, mgmtName, all)
		}
	}
	eo := existing.Options{Mode: o.Mode, AdmissionCheck: o.AdmissionCheck, ConnectTimeout: o.ConnectTimeout, Install: o.Install}
	for i, name := range append([]string{o.Manager}, workers...) {
		if _, err := getCluster(ctx, c, mgmtName, o.Namespace, name); err != nil {
			return existing.Options{}, err
		}
		wc, err := readKubeconfig(ctx, c, mgmtName, o.Namespace, name)
		if err != nil {
			return existing.Options{}, err
		}
		if i == 0 {
			eo.Manager = wc
		} else {
			eo.Workers = append(eo.Workers, wc)
		}
	}
	return eo, nil
}

// clusterNames lists the Clusters of namespace matching sel (nil: all),
// sorted.
func clusterNames(ctx context.Context, c client.Client, namespace string, sel labels.Selector) ([]string, error) {
	l := newList(ClusterGVK)
	opts := []client.ListOption{client.InNamespace(namespace)}
	if sel != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	if err := c.List(ctx, l, opts...); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(l.Items))
	for _, u := range l.Items {
		out = append(out, u.GetName())
	}
	slices.Sort(out)
	return out, nil
}
