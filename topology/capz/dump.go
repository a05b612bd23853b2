package capz

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/topology/existing"
)

// WriteClusters writes each named Cluster of namespace on the management
// cluster, followed by its MachinePools, as YAML to dir/<name>.yaml (for
// $ARTIFACTS: their conditions say why a cluster was not ready). Clusters
// and MachinePools hold no credentials; managedFields are left out. A
// Cluster that is gone is noted in its file.
func WriteClusters(ctx context.Context, mgmt existing.Cluster, namespace string, names []string, dir string) error {
	if err := checkManagement(mgmt, "management"); err != nil {
		return err
	}
	c, err := managementClient(mgmt, "management")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("capz: %w", err)
	}
	var errs []error
	for _, name := range names {
		var buf bytes.Buffer
		u := newObject(ClusterGVK)
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(&buf, "# Cluster %s/%s: not found on management cluster %q\n", namespace, name, mgmt.Name)
		case err != nil:
			errs = append(errs, fmt.Errorf("capz: management cluster %q: read Cluster %s/%s: %w", mgmt.Name, namespace, name, err))
			continue
		default:
			u.SetManagedFields(nil)
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			buf.Write(b)
		}
		mps := newList(MachinePoolGVK)
		if err := c.List(ctx, mps, client.InNamespace(namespace), client.MatchingLabels{LabelClusterName: name}); err != nil {
			errs = append(errs, fmt.Errorf("capz: management cluster %q: list MachinePools of Cluster %s/%s: %w", mgmt.Name, namespace, name, err))
		}
		for i := range mps.Items {
			mp := &mps.Items[i]
			mp.SetManagedFields(nil)
			b, err := yaml.Marshal(mp.Object)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			buf.WriteString("---\n")
			buf.Write(b)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), buf.Bytes(), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("capz: %w", err))
		}
	}
	return errors.Join(errs...)
}
