package capz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
)

// New provisions a topology on CAPZ: it creates the manager and worker
// Clusters from the ClusterClass on the management cluster, waits until
// they are ready, reads their kubeconfig Secrets, installs Kueue on them
// (o.Kueue), attaches them with topology/existing and wires MultiKueue with
// opts.Connector (default connect.KubeconfigSecret). Close deletes the
// Clusters it created and waits for them to be gone (o.DeleteTimeout);
// with o.KeepClusters it deletes only what the topology created on them.
//
// topology.Options.ManagerName and WorkerNames come from o (a conflicting
// value is an error); quotas, queues, Kueue settings and Progress are used
// as on any topology. On any error, what was created so far is deleted.
func New(ctx context.Context, opts topology.Options, o Options) (*topology.Topology, error) {
	p, err := NewProvider(o)
	if err != nil {
		return nil, err
	}
	mgr, workers := p.o.names()
	if opts.ManagerName != "" && opts.ManagerName != mgr {
		return nil, fmt.Errorf("capz: topology.Options.ManagerName: %q, but Options.Manager.Name is %q", opts.ManagerName, mgr)
	}
	if len(opts.WorkerNames) > 0 && !slices.Equal(opts.WorkerNames, workers) {
		return nil, fmt.Errorf("capz: topology.Options.WorkerNames: %v, but Options.Workers are named %v", opts.WorkerNames, workers)
	}
	opts.ManagerName, opts.WorkerNames, opts.Workers = mgr, workers, len(workers)
	p.progress = newLineWriter(opts.Progress)
	return topology.New(ctx, p, opts)
}

// Provider implements topology.Provider with CAPI Clusters on a management
// cluster. Use New; the provider is reachable as topo.Provider().(*capz.Provider).
type Provider struct {
	o        Options
	mgmt     client.Client
	progress io.Writer

	mu      sync.Mutex
	created []createdCluster

	closeOnce sync.Once
	closeErr  error
}

// DefaultConnector is connect.Default (topology.ConnectorDefaulter).
func (p *Provider) DefaultConnector() (topology.Connector, error) { return connect.Default() }

var _ topology.ConnectorDefaulter = (*Provider)(nil)

// SuggestedTimeouts implements topology.TimeoutSuggester with AKSTimeouts.
func (p *Provider) SuggestedTimeouts() topology.Timeouts { return AKSTimeouts() }

var _ topology.TimeoutSuggester = (*Provider)(nil)

// AKSTimeouts is the pace of AKS workload clusters: image pulls from public
// registries and MachinePools that scale from zero take many minutes. New
// suggests it; Attach fills the zero fields of topology.Options.Timeouts
// with it.
func AKSTimeouts() topology.Timeouts {
	return topology.Timeouts{Progress: 15 * time.Minute, Start: 15 * time.Minute}
}

type createdCluster struct {
	name string
	uid  types.UID
}

var (
	_ topology.Provider      = (*Provider)(nil)
	_ topology.ClusterKeeper = (*Provider)(nil)
)

// NewProvider checks o and returns the provider, for topology.New. New
// does this and names the clusters in topology.Options.
func NewProvider(o Options) (*Provider, error) {
	if err := o.resolve(); err != nil {
		return nil, err
	}
	c, err := managementClient(o.Management, "Options.Management")
	if err != nil {
		return nil, err
	}
	return &Provider{o: o, mgmt: c, progress: io.Discard}, nil
}

// Name implements topology.Provider.
func (*Provider) Name() string { return "capz" }

// KeepsClusters implements topology.ClusterKeeper: with KeepClusters the
// topology removes what it created on the clusters, since they stay.
func (p *Provider) KeepsClusters() bool { return p.o.KeepClusters }

// Created returns the names of the Clusters this provider created (and
// Close deletes), in creation order.
func (p *Provider) Created() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, len(p.created))
	for i, c := range p.created {
		out[i] = c.name
	}
	return out
}

// Provision implements topology.Provider. The steps, each reported to
// spec.Progress:
//
//  1. the ClusterClass exists and has every machinePool class named;
//  2. the Clusters are created in parallel;
//  3. each is waited for (ReadyConditions True, its kubeconfig Secret, each
//     topology pool's MachinePool with the wanted ready replicas), all
//     within ReadyTimeout, a line printed whenever a Cluster's state
//     changes;
//  4. the kubeconfigs are read from the Secrets (key "value");
//  5. Kueue is installed on every cluster in parallel (unless Kueue.Skip);
//  6. the clusters are handed to topology/existing, which checks that each
//     API server answers with Kueue's CRDs.
func (p *Provider) Provision(ctx context.Context, spec topology.Spec) (*topology.Cluster, []*topology.Cluster, error) {
	if p.progress == io.Discard {
		p.progress = newLineWriter(spec.Progress)
	}
	start := time.Now()
	mgmtName, ns := p.o.Management.Name, p.o.Namespace
	if err := p.checkClusterClass(ctx); err != nil {
		return nil, nil, err
	}
	specs := append([]ClusterSpec{p.o.Manager}, p.o.Workers...)
	objs := make([]*unstructured.Unstructured, len(specs))
	for i, cs := range specs {
		role := topology.RoleWorker
		if i == 0 {
			role = topology.RoleManager
		}
		u, err := p.o.clusterFor(cs, role)
		if err != nil {
			return nil, nil, err
		}
		objs[i] = u
	}
	fmt.Fprintf(p.progress, "capz: management cluster %q: creating %d Clusters in %s from ClusterClass %s/%s, Kubernetes %s\n",
		mgmtName, len(objs), ns, p.o.ClusterClass.Namespace, p.o.ClusterClass.Name, p.o.KubernetesVersion)
	if err := parallel(len(objs), func(i int) error { return p.create(ctx, objs[i]) }); err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(p.progress, "capz: waiting up to %s for %d Clusters (%s)\n", p.o.ReadyTimeout, len(specs), strings.Join(ReadyConditions(), ", "))
	err := waitAll(ctx, len(specs), func(ctx context.Context, i int) error {
		return p.waitReady(ctx, specs[i].Name, p.o.pools(specs[i]), p.o.ReadyTimeout, start)
	})
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(p.progress, "capz: %d Clusters ready in %s\n", len(specs), time.Since(start).Round(time.Second))
	attached := make([]existing.Cluster, len(specs))
	for i, cs := range specs {
		c, err := readKubeconfig(ctx, p.mgmt, mgmtName, ns, cs.Name)
		if err != nil {
			return nil, nil, err
		}
		attached[i] = c
	}
	eo := existing.Options{Mode: existing.ModeWire, Manager: attached[0], Workers: attached[1:]}
	if k := p.o.Kueue; k.Skip {
		fmt.Fprintf(p.progress, "capz: Kueue.Skip: Kueue must run on the clusters already\n")
	} else {
		eo.Install = &k.Step
	}
	mgr, workers, err := existing.NewProvider(eo).Provision(ctx, spec)
	if err != nil {
		return nil, nil, fmt.Errorf("capz: %w", err)
	}
	return mgr, workers, nil
}

// checkClusterClass fails early, naming the field, when the ClusterClass or
// one of its machinePool classes is missing.
func (p *Provider) checkClusterClass(ctx context.Context) error {
	ref := p.o.ClusterClass
	u := newObject(ClusterClassGVK)
	if err := p.mgmt.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
		if apierrors.IsNotFound(err) || isNoMatch(err) {
			return fmt.Errorf("capz: Options.ClusterClass: management cluster %q has no ClusterClass %s/%s (%v)", p.o.Management.Name, ref.Namespace, ref.Name, err)
		}
		return fmt.Errorf("capz: management cluster %q: read ClusterClass %s/%s: %w", p.o.Management.Name, ref.Namespace, ref.Name, err)
	}
	pools, _, _ := unstructured.NestedSlice(u.Object, "spec", "workers", "machinePools")
	var classes []string
	for _, mp := range pools {
		if m, ok := mp.(map[string]any); ok {
			if c, ok := m["class"].(string); ok {
				classes = append(classes, c)
			}
		}
	}
	for i, cs := range append([]ClusterSpec{p.o.Manager}, p.o.Workers...) {
		field := "Options.Manager"
		if i > 0 {
			field = fmt.Sprintf("Options.Workers[%d]", i-1)
		}
		if len(cs.MachinePools) == 0 {
			field = "Options"
		}
		for j, mp := range p.o.pools(cs) {
			if !slices.Contains(classes, mp.Class) {
				return fmt.Errorf("capz: %s.MachinePools[%d].Class: %q is not a machinePool class of ClusterClass %s/%s (it has %v)", field, j, mp.Class, ref.Namespace, ref.Name, classes)
			}
		}
	}
	return nil
}

// create creates one Cluster and records it for Close.
func (p *Provider) create(ctx context.Context, u *unstructured.Unstructured) error {
	where := fmt.Sprintf("management cluster %q: Cluster %s/%s", p.o.Management.Name, u.GetNamespace(), u.GetName())
	if err := p.mgmt.Create(ctx, u); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("capz: %s exists already; it is not taken over: use capz.Attach for Clusters you have, or other names", where)
		}
		return fmt.Errorf("capz: %s: create: %w", where, err)
	}
	p.mu.Lock()
	p.created = append(p.created, createdCluster{name: u.GetName(), uid: u.GetUID()})
	p.mu.Unlock()
	fmt.Fprintf(p.progress, "capz: %s created\n", where)
	return nil
}

// Close implements topology.Provider: it deletes the Clusters this provider
// created (unless KeepClusters) and waits up to DeleteTimeout until they are
// gone; the error names each Cluster left, with its deletion state. A
// Cluster deleted and made again by someone else under the same name is
// not touched. Safe after a failed Provision and when called again.
func (p *Provider) Close(ctx context.Context) error {
	p.closeOnce.Do(func() { p.closeErr = p.close(ctx) })
	return p.closeErr
}

func (p *Provider) close(ctx context.Context) error {
	p.mu.Lock()
	created := slices.Clone(p.created)
	p.mu.Unlock()
	if len(created) == 0 {
		return nil
	}
	mgmtName, ns := p.o.Management.Name, p.o.Namespace
	if p.o.KeepClusters {
		fmt.Fprintf(p.progress, "capz: keeping Clusters %v in %s on management cluster %q (KeepClusters)\n", names(created), ns, mgmtName)
		return nil
	}
	start := time.Now()
	var errs []error
	for _, cc := range created {
		u := newObject(ClusterGVK)
		u.SetNamespace(ns)
		u.SetName(cc.name)
		uid := cc.uid
		err := p.mgmt.Delete(ctx, u, client.Preconditions{UID: &uid}, client.PropagationPolicy("Background"))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("capz: management cluster %q: delete Cluster %s/%s: %w", mgmtName, ns, cc.name, err))
		}
	}
	fmt.Fprintf(p.progress, "capz: deleting Clusters %v; waiting up to %s for them to be gone\n", names(created), p.o.DeleteTimeout)
	lastCount := len(created)
	var left []string
	err := poll.UntilEvery(ctx, p.o.DeleteTimeout, p.o.PollInterval, "the Clusters to be deleted", func(ctx context.Context) error {
		now, err := p.remaining(ctx, created)
		if err != nil {
			return err
		}
		left = now
		if len(left) != lastCount {
			lastCount = len(left)
			fmt.Fprintf(p.progress, "capz: %d of %d Clusters gone (+%s)\n", len(created)-len(left), len(created), time.Since(start).Round(time.Second))
		}
		if len(left) > 0 {
			return errors.New(strings.Join(left, "; "))
		}
		return nil
	})
	if err != nil {
		if len(left) > 0 {
			errs = append(errs, fmt.Errorf("capz: management cluster %q: %d Clusters not deleted within %s: %s", mgmtName, len(left), p.o.DeleteTimeout, strings.Join(left, "; ")))
		} else {
			errs = append(errs, fmt.Errorf("capz: management cluster %q: %w", mgmtName, err))
		}
	} else {
		fmt.Fprintf(p.progress, "capz: Clusters %v deleted in %s\n", names(created), time.Since(start).Round(time.Second))
	}
	return errors.Join(errs...)
}

func names(cc []createdCluster) []string {
	out := make([]string, len(cc))
	for i, c := range cc {
		out[i] = c.name
	}
	return out
}

// parallel runs f(0..n-1) concurrently and joins the errors.
func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// errOtherFailed stops the other waits when one Cluster can never be ready.
var errOtherFailed = errors.New("another Cluster failed")

// waitAll runs f(ctx, 0..n-1) concurrently. A failure other than a timeout
// (a Cluster deleted under the wait) stops the others, whose errors are then
// left out; timeouts do not, so that every Cluster late at the deadline is
// named.
func waitAll(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := f(ctx, i)
			var timeout *poll.TimeoutError
			if err != nil && !errors.As(err, &timeout) && !errors.Is(err, errOtherFailed) {
				cancel(errOtherFailed)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil && !errors.Is(err, errOtherFailed) {
			out = append(out, err)
		}
	}
	return errors.Join(out...)
}

// lineWriter serialises writes so that concurrent progress lines stay whole.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func newLineWriter(w io.Writer) io.Writer {
	if w == nil || w == io.Discard {
		return io.Discard
	}
	if lw, ok := w.(*lineWriter); ok {
		return lw
	}
	return &lineWriter{w: w}
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
