package connect

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/topology"
)

// UnreachableAddress is where Sever points a worker's connection by
// default: nothing listens on port 1 of the loopback address, wherever the
// manager's Kueue runs (a process here, a pod on kind or AKS), so every
// request is refused at once.
const UnreachableAddress = "https://127.0.0.1:1"

// Severed is a worker connection Sever made unreachable. Restore writes
// back what was there.
type Severed struct {
	// Source names what was edited on the manager: "Secret ns/name (key
	// kubeconfig)" or "ClusterProfile ns/name (status.accessProviders)".
	Source string
	// Worker is the MultiKueueCluster whose connection was cut.
	Worker string

	mgr     *topology.Cluster
	key     client.ObjectKey
	secret  []byte   // the kubeconfig as it was (Secret source)
	servers []string // each access provider's server as it was (ClusterProfile source)
}

// Sever makes the manager's Kueue lose worker without touching the worker:
// it reads the MultiKueueCluster named worker on mgr, and in the object its
// spec.clusterSource names — a kubeconfig Secret in kueueNamespace or a
// ClusterProfile — points every server address at address
// (UnreachableAddress when empty). The credentials stay as they were and
// nothing is printed of them. Kueue watches both kinds of object, so it
// reconnects, fails, and marks the cluster Active=False. A kubeconfig given
// by path (locationType Path) cannot be edited from the API: that is an
// error naming it.
func Sever(ctx context.Context, mgr *topology.Cluster, kueueNamespace, worker, address string) (*Severed, error) {
	if address == "" {
		address = UnreachableAddress
	}
	key, profile, err := connectionOf(ctx, mgr, kueueNamespace, worker)
	if err != nil {
		return nil, err
	}
	s := &Severed{Worker: worker, mgr: mgr, key: key}
	if profile {
		s.Source = fmt.Sprintf("ClusterProfile %s (status.accessProviders)", s.key)
		return s, s.cutProfile(ctx, address)
	}
	s.Source = fmt.Sprintf("Secret %s (key %s)", s.key, SecretKey)
	return s, s.cutSecret(ctx, address)
}

// connectionOf reads the MultiKueueCluster named worker on mgr and returns
// the object its spec.clusterSource names in kueueNamespace: a kubeconfig
// Secret, or a ClusterProfile (profile true). A kubeconfig given by path,
// which the API cannot reach, or no source at all is an error naming it.
func connectionOf(ctx context.Context, mgr *topology.Cluster, kueueNamespace, worker string) (key client.ObjectKey, profile bool, err error) {
	var mkc kueue.MultiKueueCluster
	if err := mgr.Client.Get(ctx, client.ObjectKey{Name: worker}, &mkc); err != nil {
		return key, false, fmt.Errorf("cluster %q: read MultiKueueCluster %s: %w", mgr.Name, worker, err)
	}
	src := mkc.Spec.ClusterSource
	switch {
	case src.KubeConfig != nil && src.KubeConfig.LocationType == kueue.PathLocationType:
		return key, false, fmt.Errorf("cluster %q: MultiKueueCluster %s reads its kubeconfig from the path %q on the manager's Kueue, which cannot be edited through the API; use a Secret or a ClusterProfile", mgr.Name, worker, src.KubeConfig.Location)
	case src.KubeConfig != nil:
		return client.ObjectKey{Namespace: kueueNamespace, Name: src.KubeConfig.Location}, false, nil
	case src.ClusterProfileRef != nil:
		return client.ObjectKey{Namespace: kueueNamespace, Name: src.ClusterProfileRef.Name}, true, nil
	}
	return key, false, fmt.Errorf("cluster %q: MultiKueueCluster %s has no spec.clusterSource (neither kubeConfig nor clusterProfileRef)", mgr.Name, worker)
}

func (s *Severed) cutSecret(ctx context.Context, address string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var sec corev1.Secret
		if err := s.mgr.Client.Get(ctx, s.key, &sec); err != nil {
			return fmt.Errorf("cluster %q: read %s: %w", s.mgr.Name, s.Source, err)
		}
		raw, ok := sec.Data[SecretKey]
		if !ok {
			return fmt.Errorf("cluster %q: %s: no key %q", s.mgr.Name, s.Source, SecretKey)
		}
		cfg, err := clientcmd.Load(raw)
		if err != nil {
			return fmt.Errorf("cluster %q: %s: not a kubeconfig: %w", s.mgr.Name, s.Source, err)
		}
		if len(cfg.Clusters) == 0 {
			return fmt.Errorf("cluster %q: %s: the kubeconfig names no cluster", s.mgr.Name, s.Source)
		}
		for _, c := range cfg.Clusters {
			c.Server = address
		}
		cut, err := clientcmd.Write(*cfg)
		if err != nil {
			return fmt.Errorf("cluster %q: %s: write the kubeconfig: %w", s.mgr.Name, s.Source, err)
		}
		s.secret = slices.Clone(raw)
		sec.Data[SecretKey] = cut
		if err := s.mgr.Client.Update(ctx, &sec); err != nil {
			return fmt.Errorf("cluster %q: update %s: %w", s.mgr.Name, s.Source, err)
		}
		return nil
	})
}

func (s *Severed) cutProfile(ctx context.Context, address string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cp inventoryv1alpha1.ClusterProfile
		if err := s.mgr.Client.Get(ctx, s.key, &cp); err != nil {
			return fmt.Errorf("cluster %q: read %s: %w", s.mgr.Name, s.Source, err)
		}
		if len(cp.Status.AccessProviders) == 0 {
			return fmt.Errorf("cluster %q: %s: no access provider to cut", s.mgr.Name, s.Source)
		}
		s.servers = nil
		for i := range cp.Status.AccessProviders {
			s.servers = append(s.servers, cp.Status.AccessProviders[i].Cluster.Server)
			cp.Status.AccessProviders[i].Cluster.Server = address
		}
		if err := s.mgr.Client.Status().Update(ctx, &cp); err != nil {
			return fmt.Errorf("cluster %q: update %s: %w", s.mgr.Name, s.Source, err)
		}
		return nil
	})
}

// Restore writes back the connection as Sever found it.
func (s *Severed) Restore(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if s.secret != nil {
			var sec corev1.Secret
			if err := s.mgr.Client.Get(ctx, s.key, &sec); err != nil {
				return fmt.Errorf("cluster %q: read %s: %w", s.mgr.Name, s.Source, err)
			}
			if sec.Data == nil {
				sec.Data = map[string][]byte{}
			}
			sec.Data[SecretKey] = s.secret
			if err := s.mgr.Client.Update(ctx, &sec); err != nil {
				return fmt.Errorf("cluster %q: restore %s: %w", s.mgr.Name, s.Source, err)
			}
			return nil
		}
		var cp inventoryv1alpha1.ClusterProfile
		if err := s.mgr.Client.Get(ctx, s.key, &cp); err != nil {
			return fmt.Errorf("cluster %q: read %s: %w", s.mgr.Name, s.Source, err)
		}
		if len(cp.Status.AccessProviders) != len(s.servers) {
			return fmt.Errorf("cluster %q: restore %s: it has %d access providers now, %d when cut", s.mgr.Name, s.Source, len(cp.Status.AccessProviders), len(s.servers))
		}
		for i := range cp.Status.AccessProviders {
			cp.Status.AccessProviders[i].Cluster.Server = s.servers[i]
		}
		if err := s.mgr.Client.Status().Update(ctx, &cp); err != nil {
			return fmt.Errorf("cluster %q: restore %s: %w", s.mgr.Name, s.Source, err)
		}
		return nil
	})
}
