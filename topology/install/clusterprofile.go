package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
)

// fieldOwner is the server-side apply field manager of what this package
// applies outside Helm.
const fieldOwner = "multikueue-testkit"

// clusterProfileCRDFile is the ClusterProfile CRD in the pinned
// cluster-inventory-api module.
const clusterProfileCRDFile = "config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml"

// applyClusterProfileCRD applies the ClusterProfile CRD of the pinned
// cluster-inventory-api module (server-side apply, so an existing one is
// updated, not duplicated) and waits until it is Established. It is not part
// of the Helm release: Uninstall leaves it.
func applyClusterProfileCRD(ctx context.Context, w *waiter) error {
	root, err := modsrc.Dir(ctx, modsrc.ClusterInventory)
	if err != nil {
		return fmt.Errorf("install: cluster %q: locating the ClusterProfile CRD: %w", w.cluster.Name, err)
	}
	path := filepath.Join(root, filepath.FromSlash(clusterProfileCRDFile))
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("install: cluster %q: reading the ClusterProfile CRD: %w", w.cluster.Name, err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
		return fmt.Errorf("install: cluster %q: decoding %s: %w", w.cluster.Name, path, err)
	}
	fmt.Fprintf(w.progress, "install: cluster %q: applying CustomResourceDefinition %s (needed by the connector)\n", w.cluster.Name, crd.GetName())
	if err := w.client.Patch(ctx, crd, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("install: cluster %q: applying CustomResourceDefinition %s: %w", w.cluster.Name, crd.GetName(), err)
	}
	return w.crdEstablished(ctx, crd.GetName())
}
