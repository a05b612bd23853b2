package capz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/topology/existing"
)

// managementClient is m.Client, or a client built from m.Config with
// client-go's scheme (Secrets; CAPI objects are unstructured).
func managementClient(m existing.Cluster, field string) (client.Client, error) {
	if m.Client != nil {
		return m.Client, nil
	}
	c, err := client.New(rest.CopyConfig(m.Config), client.Options{})
	if err != nil {
		return nil, fmt.Errorf("capz: %s: management cluster %q: %w", field, m.Name, err)
	}
	return c, nil
}

func isNoMatch(err error) bool { return meta.IsNoMatchError(err) }

// WorkloadCluster attaches the workload cluster of CAPI Cluster
// namespace/name on the management cluster mgmt, from its kubeconfig Secret
// "<name>-kubeconfig" (key "value"), under the Cluster's name. The Cluster
// must exist. Errors name the Cluster and the Secret, never the Secret's
// content.
func WorkloadCluster(ctx context.Context, mgmt existing.Cluster, namespace, name string) (existing.Cluster, error) {
	if err := checkManagement(mgmt, "management"); err != nil {
		return existing.Cluster{}, err
	}
	c, err := managementClient(mgmt, "management")
	if err != nil {
		return existing.Cluster{}, err
	}
	if _, err := getCluster(ctx, c, mgmt.Name, namespace, name); err != nil {
		return existing.Cluster{}, err
	}
	return readKubeconfig(ctx, c, mgmt.Name, namespace, name)
}

// getCluster reads a Cluster; NotFound says which Clusters the namespace has.
func getCluster(ctx context.Context, c client.Client, mgmtName, namespace, name string) (clusterStatus, error) {
	u := newObject(ClusterGVK)
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		have, _ := clusterNames(ctx, c, namespace, nil)
		return clusterStatus{}, fmt.Errorf("capz: management cluster %q has no Cluster %s/%s (it has %v)", mgmtName, namespace, name, have)
	}
	if isNoMatch(err) {
		return clusterStatus{}, fmt.Errorf("capz: management cluster %q does not serve %s Clusters: is CAPI installed there? (%v)", mgmtName, APIVersion, err)
	}
	if err != nil {
		return clusterStatus{}, fmt.Errorf("capz: management cluster %q: read Cluster %s/%s: %w", mgmtName, namespace, name, err)
	}
	var st clusterStatus
	if err := statusOf(u, &st); err != nil {
		return clusterStatus{}, fmt.Errorf("capz: management cluster %q: %w", mgmtName, err)
	}
	return st, nil
}

// readKubeconfig reads the kubeconfig Secret of Cluster namespace/name.
func readKubeconfig(ctx context.Context, c client.Client, mgmtName, namespace, name string) (existing.Cluster, error) {
	secret := fmt.Sprintf("Secret %s/%s", namespace, KubeconfigSecretName(name))
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: KubeconfigSecretName(name)}, s); err != nil {
		if apierrors.IsNotFound(err) {
			st, _ := getCluster(ctx, c, mgmtName, namespace, name)
			return existing.Cluster{}, fmt.Errorf("capz: management cluster %q: Cluster %s/%s has no kubeconfig %s yet (%s)", mgmtName, namespace, name, secret, conditionSummary(st))
		}
		return existing.Cluster{}, fmt.Errorf("capz: management cluster %q: read %s: %w", mgmtName, secret, err)
	}
	raw, ok := s.Data[KubeconfigKey]
	if !ok || len(raw) == 0 {
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return existing.Cluster{}, fmt.Errorf("capz: management cluster %q: %s has no key %q (keys %v)", mgmtName, secret, KubeconfigKey, keys)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		// clientcmd's errors may quote the input; say only where it was.
		return existing.Cluster{}, fmt.Errorf("capz: management cluster %q: %s key %q is not a usable kubeconfig", mgmtName, secret, KubeconfigKey)
	}
	return existing.Cluster{Name: name, Config: cfg}, nil
}

// conditionSummary prints the ReadyConditions of a Cluster status.
func conditionSummary(st clusterStatus) string {
	var parts []string
	for _, t := range ReadyConditions() {
		s := "not reported"
		for _, c := range st.Conditions {
			if c.Type == t {
				s = string(c.Status)
				if c.Reason != "" {
					s += " (" + c.Reason + ")"
				}
			}
		}
		parts = append(parts, t+"="+s)
	}
	return strings.Join(parts, ", ")
}
