package capztest

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/multikueue-testkit/testkit/topology/capz"
)

// AKSClusterClass is a ClusterClass shaped like the one of CAPZ's
// aks-clusterclass flavor, in CAPI v1beta2 form: an
// AzureManagedControlPlaneTemplate, an AzureManagedClusterTemplate and two
// machinePool classes, default-system and default-worker, each with an
// AzureManagedMachinePoolTemplate and a KubeadmConfigTemplate. The
// templates it names do not exist: nothing here reads them. It declares
// one optional variable, "location" (a string), which CAPZ's flavor bakes
// in with clusterctl's variable substitution instead.
func AKSClusterClass(namespace, name string) *unstructured.Unstructured {
	ref := func(apiVersion, kind, n string) map[string]any {
		return map[string]any{"templateRef": map[string]any{"apiVersion": apiVersion, "kind": kind, "name": n}}
	}
	const infra = "infrastructure.cluster.x-k8s.io/v1beta1"
	const bootstrap = "bootstrap.cluster.x-k8s.io/v1beta2"
	pool := func(class, template string) any {
		return map[string]any{
			"class":          class,
			"bootstrap":      ref(bootstrap, "KubeadmConfigTemplate", template),
			"infrastructure": ref(infra, "AzureManagedMachinePoolTemplate", template),
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"controlPlane":   ref(infra, "AzureManagedControlPlaneTemplate", name+"-control-plane"),
			"infrastructure": ref(infra, "AzureManagedClusterTemplate", name),
			"workers": map[string]any{"machinePools": []any{
				pool("default-system", name+"-pool0"),
				pool("default-worker", name+"-pool1"),
			}},
			"variables": []any{map[string]any{
				"name":     "location",
				"required": false,
				"schema":   map[string]any{"openAPIV3Schema": map[string]any{"type": "string"}},
			}},
		},
	}}
	u.SetGroupVersionKind(capz.ClusterClassGVK)
	return u
}

func newObject(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

func newList(gvk schema.GroupVersionKind) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return l
}
