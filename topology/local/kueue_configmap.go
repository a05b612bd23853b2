package local

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/multikueue-testkit/testkit/topology"
)

// publishKueueConfig writes the configuration file the in-process Kueue
// loads into ConfigMap kueue-manager-config (key
// controller_manager_config.yaml) in Kueue's namespace, where a deployed
// Kueue keeps it. Readers of the cluster (topology.ReadKueueFacts, a test
// that attaches these clusters by kubeconfig) then learn gcInterval, origin,
// dispatcher and gates from the cluster, as from a real installation.
//
// version, when known, is what the Kueue process reported at start; it goes
// to the annotation topology.KueueVersionAnnotation.
func publishKueueConfig(ctx context.Context, c *topology.Cluster, namespace, path, version string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c.Client, ns, func() error { return nil }); err != nil {
		return fmt.Errorf("cluster %q: create Namespace %s: %w", c.Name, namespace, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: topology.KueueConfigMapName, Namespace: namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c.Client, cm, func() error {
		cm.Data = map[string]string{topology.KueueConfigKey: string(raw)}
		if version != "" {
			metav1.SetMetaDataAnnotation(&cm.ObjectMeta, topology.KueueVersionAnnotation, version)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("cluster %q: write ConfigMap %s/%s: %w", c.Name, namespace, cm.Name, err)
	}
	return nil
}
