package topology

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// AdoptOptions choose among several MultiKueue setups on one manager.
type AdoptOptions struct {
	// AdmissionCheck names the MultiKueue AdmissionCheck to adopt; needed only
	// when the manager has more than one.
	AdmissionCheck string
}

// Adopt attaches a topology whose MultiKueue setup already exists: it
// provisions (attaches) the clusters with provider, finds on the manager the
// MultiKueue AdmissionCheck, its MultiKueueConfig and MultiKueueClusters,
// maps each worker to its MultiKueueCluster (by name, else by the API server
// address in the MultiKueueCluster's kubeconfig Secret or ClusterProfile),
// reads Kueue's configuration and the queue names from the clusters, and
// waits until the setup is Active. Each worker's Name becomes its
// MultiKueueCluster's name (the name Kueue uses in status.clusterName).
//
// Adopt creates nothing on the clusters, and Close deletes nothing from
// them. Options give the names of the clusters (ManagerName, WorkerNames, as
// the provider knows them) and, optionally, Kueue values to confirm: a given
// value the manager contradicts is an error naming both. Quotas, queue and
// check names in Options are ignored: they are read from the objects
// (Spec.Quotas holds each cluster's ClusterQueue nominal quota, and no entry
// for a cluster whose queue could not be read).
func Adopt(ctx context.Context, provider Provider, opts Options, aopts AdoptOptions) (*Topology, error) {
	if provider == nil {
		return nil, errors.New("topology: provider is nil")
	}
	spec, err := opts.Resolve()
	if err != nil {
		return nil, err
	}
	t := &Topology{Spec: spec, provider: provider, ProviderName: provider.Name(), ConnectorName: "adopted"}
	mgr, workers, err := provider.Provision(ctx, spec)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("topology: provider %s: %w", provider.Name(), err), t.Close(context.WithoutCancel(ctx)))
	}
	t.Manager, t.Workers = mgr, workers
	if err := t.adopt(ctx, opts, aopts); err != nil {
		return nil, errors.Join(err, t.Close(context.WithoutCancel(ctx)))
	}
	return t, nil
}

func (t *Topology) adopt(ctx context.Context, given Options, aopts AdoptOptions) error {
	if _, err := t.learnFacts(ctx, given); err != nil {
		return err
	}
	mgr, ns := t.Manager, t.Spec.Kueue.Namespace
	ac, err := findMultiKueueCheck(ctx, mgr, aopts.AdmissionCheck)
	if err != nil {
		return err
	}
	if ac.Spec.Parameters == nil || ac.Spec.Parameters.Kind != "MultiKueueConfig" {
		return fmt.Errorf("topology: cluster %q: AdmissionCheck %s has no MultiKueueConfig parameters", mgr.Name, ac.Name)
	}
	cfg := &kueue.MultiKueueConfig{}
	if err := mgr.Client.Get(ctx, client.ObjectKey{Name: ac.Spec.Parameters.Name}, cfg); err != nil {
		return fmt.Errorf("topology: cluster %q: MultiKueueConfig %s (of AdmissionCheck %s): %w", mgr.Name, ac.Spec.Parameters.Name, ac.Name, err)
	}
	mapped := make([]*Cluster, 0, len(cfg.Spec.Clusters))
	used := map[*Cluster]string{}
	var unmapped []string
	for _, name := range cfg.Spec.Clusters {
		mkc := &kueue.MultiKueueCluster{}
		if err := mgr.Client.Get(ctx, client.ObjectKey{Name: name}, mkc); err != nil {
			return fmt.Errorf("topology: cluster %q: MultiKueueCluster %s (listed in MultiKueueConfig %s): %w", mgr.Name, name, cfg.Name, err)
		}
		w, how, err := t.workerFor(ctx, mkc, ns, used)
		if err != nil {
			return err
		}
		if w == nil {
			unmapped = append(unmapped, fmt.Sprintf("MultiKueueCluster %s (%s)", name, how))
			continue
		}
		used[w] = name
		if w.Name != name {
			fmt.Fprintf(t.Spec.Progress, "topology: worker %q is MultiKueueCluster %s (%s); it is called %q from now on\n", w.Name, name, how, name)
		}
		w.Name = name
		mapped = append(mapped, w)
	}
	var extra []string
	for _, w := range t.Workers {
		if _, ok := used[w]; !ok {
			extra = append(extra, fmt.Sprintf("%q (%s)", w.Name, w.ServerForManager()))
		}
	}
	if len(unmapped) > 0 || len(extra) > 0 {
		msg := fmt.Sprintf("topology: cluster %q: AdmissionCheck %s / MultiKueueConfig %s does not match the workers given", mgr.Name, ac.Name, cfg.Name)
		if len(unmapped) > 0 {
			msg += "; no worker given for " + strings.Join(unmapped, ", ")
		}
		if len(extra) > 0 {
			msg += "; no MultiKueueCluster for worker " + strings.Join(extra, ", ")
		}
		return errors.New(msg)
	}
	t.Workers = mapped
	s := &t.Spec
	s.WorkerNames = append([]string(nil), cfg.Spec.Clusters...)
	s.Workers = len(mapped)
	s.Queues.AdmissionCheck, s.Queues.MultiKueueConfig = ac.Name, cfg.Name
	if err := t.adoptQueues(ctx); err != nil {
		return err
	}
	fmt.Fprintf(s.Progress, "topology: adopted AdmissionCheck %s, MultiKueueConfig %s with %d workers; waiting up to %s for Active\n", ac.Name, cfg.Name, len(mapped), s.ReadyTimeout)
	return t.WaitActive(ctx)
}

// findMultiKueueCheck returns the named AdmissionCheck, or the manager's only
// MultiKueue one.
func findMultiKueueCheck(ctx context.Context, mgr *Cluster, name string) (*kueue.AdmissionCheck, error) {
	var acs kueue.AdmissionCheckList
	if err := mgr.Client.List(ctx, &acs); err != nil {
		return nil, fmt.Errorf("topology: cluster %q: list AdmissionChecks: %w", mgr.Name, err)
	}
	var found []*kueue.AdmissionCheck
	var names []string
	for i := range acs.Items {
		ac := &acs.Items[i]
		if ac.Spec.ControllerName != kueue.MultiKueueControllerName {
			continue
		}
		if name == "" || ac.Name == name {
			found = append(found, ac)
		}
		names = append(names, ac.Name)
	}
	slices.Sort(names)
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0 && name != "":
		return nil, fmt.Errorf("topology: AdoptOptions.AdmissionCheck: cluster %q has no MultiKueue AdmissionCheck %q (it has %v)", mgr.Name, name, names)
	case len(found) == 0:
		return nil, fmt.Errorf("topology: cluster %q has no AdmissionCheck with controllerName %s: MultiKueue is not set up there (use wire mode)", mgr.Name, kueue.MultiKueueControllerName)
	default:
		return nil, fmt.Errorf("topology: AdoptOptions.AdmissionCheck: cluster %q has %d MultiKueue AdmissionChecks %v; name one", mgr.Name, len(found), names)
	}
}

// workerFor finds the given worker a MultiKueueCluster stands for: by name,
// else by the server address its credentials point at. how describes the
// match (or, when none, the address looked for).
func (t *Topology) workerFor(ctx context.Context, mkc *kueue.MultiKueueCluster, ns string, used map[*Cluster]string) (*Cluster, string, error) {
	for _, w := range t.Workers {
		if _, taken := used[w]; !taken && w.Name == mkc.Name {
			return w, "same name", nil
		}
	}
	server, src, err := mkcServer(ctx, t.Manager, mkc, ns)
	if err != nil {
		return nil, "", err
	}
	if server == "" {
		return nil, src + " names no server", nil
	}
	for _, w := range t.Workers {
		if _, taken := used[w]; taken {
			continue
		}
		if sameServer(server, w.ServerForManager()) || sameServer(server, w.Config.Host) {
			return w, "server " + server + " from " + src, nil
		}
	}
	return nil, "server " + server + " from " + src, nil
}

// mkcServer reads the API server address a MultiKueueCluster's credentials
// point at: its kubeconfig Secret's current cluster, or its ClusterProfile's
// first access provider. A kubeconfig at a Path lives in Kueue's pod and
// cannot be read from here.
func mkcServer(ctx context.Context, mgr *Cluster, mkc *kueue.MultiKueueCluster, ns string) (server, source string, err error) {
	src := mkc.Spec.ClusterSource
	switch {
	case src.KubeConfig != nil && src.KubeConfig.LocationType == kueue.SecretLocationType:
		source = fmt.Sprintf("Secret %s/%s", ns, src.KubeConfig.Location)
		sec := &corev1.Secret{}
		if err := mgr.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.KubeConfig.Location}, sec); err != nil {
			return "", "", fmt.Errorf("topology: cluster %q: MultiKueueCluster %s: read %s: %w", mgr.Name, mkc.Name, source, err)
		}
		cfg, err := clientcmd.Load(sec.Data["kubeconfig"])
		if err != nil {
			return "", "", fmt.Errorf("topology: cluster %q: MultiKueueCluster %s: %s key kubeconfig is not a kubeconfig", mgr.Name, mkc.Name, source)
		}
		if ctxt := cfg.Contexts[cfg.CurrentContext]; ctxt != nil {
			if cl := cfg.Clusters[ctxt.Cluster]; cl != nil {
				return cl.Server, source, nil
			}
		}
		return "", source, nil
	case src.ClusterProfileRef != nil:
		source = fmt.Sprintf("ClusterProfile %s/%s", ns, src.ClusterProfileRef.Name)
		cp := &inventoryv1alpha1.ClusterProfile{}
		if err := mgr.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.ClusterProfileRef.Name}, cp); err != nil {
			return "", "", fmt.Errorf("topology: cluster %q: MultiKueueCluster %s: read %s: %w", mgr.Name, mkc.Name, source, err)
		}
		for _, p := range append(slices.Clone(cp.Status.AccessProviders), cp.Status.CredentialProviders...) {
			if p.Cluster.Server != "" {
				return p.Cluster.Server, source, nil
			}
		}
		return "", source, nil
	case src.KubeConfig != nil:
		return "", fmt.Sprintf("kubeconfig at path %s inside Kueue's pod", src.KubeConfig.Location), nil
	}
	return "", "no clusterSource", nil
}

// sameServer compares API server URLs by scheme, host and port.
func sameServer(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if u.Scheme == "http" {
			return "80"
		}
		return "443"
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Hostname(), ub.Hostname()) && port(ua) == port(ub)
}

// adoptQueues reads the queue names from the manager: the ClusterQueues that
// use the adopted AdmissionCheck and the LocalQueues that point at them.
func (t *Topology) adoptQueues(ctx context.Context) error {
	mgr, s := t.Manager, &t.Spec
	cqs, err := t.managerQueues(ctx)
	if err != nil {
		return err
	}
	if len(cqs) == 0 {
		return fmt.Errorf("topology: cluster %q: no ClusterQueue uses AdmissionCheck %s", mgr.Name, s.Queues.AdmissionCheck)
	}
	s.Queues.ClusterQueue = cqs[0]
	var lqs kueue.LocalQueueList
	if err := mgr.Client.List(ctx, &lqs); err != nil {
		return fmt.Errorf("topology: cluster %q: list LocalQueues: %w", mgr.Name, err)
	}
	slices.SortFunc(lqs.Items, func(a, b kueue.LocalQueue) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var namespaces []string
	for _, lq := range lqs.Items {
		if string(lq.Spec.ClusterQueue) != s.Queues.ClusterQueue {
			continue
		}
		if s.Queues.LocalQueue == "" || len(namespaces) == 0 {
			s.Queues.LocalQueue = lq.Name
		}
		if lq.Name == s.Queues.LocalQueue && !slices.Contains(namespaces, lq.Namespace) {
			namespaces = append(namespaces, lq.Namespace)
		}
	}
	if len(namespaces) == 0 {
		return fmt.Errorf("topology: cluster %q: no LocalQueue points at ClusterQueue %s", mgr.Name, s.Queues.ClusterQueue)
	}
	s.Queues.Namespaces = namespaces
	return t.adoptQuotas(ctx)
}

// adoptQuotas replaces the quotas Resolve defaulted with the clusters' own:
// the manager's adopted ClusterQueue and, on each worker, the ClusterQueue
// its LocalQueue of the adopted name points at, each the sum of its nominal
// quotas over flavors. A cluster whose queue cannot be read has no entry
// in Spec.Quotas (its quota is unknown), and the progress says why.
func (t *Topology) adoptQuotas(ctx context.Context) error {
	s := &t.Spec
	s.Quotas = map[string]corev1.ResourceList{}
	for _, c := range t.Clusters() {
		cqName := s.Queues.ClusterQueue
		if c != t.Manager {
			lq := &kueue.LocalQueue{}
			key := client.ObjectKey{Namespace: s.Queues.Namespaces[0], Name: s.Queues.LocalQueue}
			if err := c.Client.Get(ctx, key, lq); err != nil {
				fmt.Fprintf(s.Progress, "topology: cluster %q: quota unknown: LocalQueue %s: %v\n", c.Name, key, err)
				continue
			}
			cqName = string(lq.Spec.ClusterQueue)
		}
		cq := &kueue.ClusterQueue{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: cqName}, cq); err != nil {
			fmt.Fprintf(s.Progress, "topology: cluster %q: quota unknown: ClusterQueue %s: %v\n", c.Name, cqName, err)
			continue
		}
		s.Quotas[c.Name] = nominalQuota(cq)
	}
	return nil
}

// nominalQuota sums a ClusterQueue's nominal quotas per resource over its
// resource groups and flavors.
func nominalQuota(cq *kueue.ClusterQueue) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, rg := range cq.Spec.ResourceGroups {
		for _, fq := range rg.Flavors {
			for _, r := range fq.Resources {
				q := out[r.Name]
				q.Add(r.NominalQuota)
				out[r.Name] = q
			}
		}
	}
	return out
}

// managerQueues returns the names of the manager's ClusterQueues that use
// the topology's AdmissionCheck, sorted.
func (t *Topology) managerQueues(ctx context.Context) ([]string, error) {
	var cqs kueue.ClusterQueueList
	if err := t.Manager.Client.List(ctx, &cqs); err != nil {
		return nil, fmt.Errorf("topology: cluster %q: list ClusterQueues: %w", t.Manager.Name, err)
	}
	var out []string
	for _, cq := range cqs.Items {
		if st := cq.Spec.AdmissionChecksStrategy; st != nil {
			for _, r := range st.AdmissionChecks {
				if string(r.Name) == t.Spec.Queues.AdmissionCheck {
					out = append(out, cq.Name)
				}
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
