package capz

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/multikueue-testkit/testkit/topology"
)

// CAPI objects are handled as unstructured objects with the small typed
// mirrors below, for the fields read and written here: CAPI's Go types
// (sigs.k8s.io/cluster-api v1.13) require newer k8s.io modules than the
// testkit pins. The API version is v1beta2, the storage version of CAPI
// v1.13's CRDs (which serve v1beta1 too).
const (
	Group      = "cluster.x-k8s.io"
	APIVersion = Group + "/v1beta2"
)

// GroupVersionKinds of the CAPI objects used here.
var (
	ClusterGVK      = schema.GroupVersionKind{Group: Group, Version: "v1beta2", Kind: "Cluster"}
	MachinePoolGVK  = schema.GroupVersionKind{Group: Group, Version: "v1beta2", Kind: "MachinePool"}
	ClusterClassGVK = schema.GroupVersionKind{Group: Group, Version: "v1beta2", Kind: "ClusterClass"}
)

// Labels and annotations.
const (
	// LabelRole is "manager" or "worker" on the Clusters Provision creates.
	LabelRole = "multikueue-testkit/role"
	// LabelManager names the manager Cluster on every Cluster Provision
	// creates: select a topology's workers with
	// "multikueue-testkit/role=worker,multikueue-testkit/manager=<name>".
	LabelManager = "multikueue-testkit/manager"

	// CAPI's labels on the MachinePools its topology controller makes.
	LabelClusterName   = "cluster.x-k8s.io/cluster-name"
	LabelTopologyPool  = "topology.cluster.x-k8s.io/pool-name"
	LabelTopologyOwned = "topology.cluster.x-k8s.io/owned"

	// The cluster-api autoscaler's node group size annotations.
	AnnotationAutoscalerMin = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	AnnotationAutoscalerMax = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"

	// KubeconfigKey is the key of a workload cluster's kubeconfig in its
	// "<cluster>-kubeconfig" Secret.
	KubeconfigKey = "value"
)

// ReadyConditions are the Cluster conditions (CAPI v1.13, v1beta2) that
// Provision waits for, in this order. InfrastructureReady mirrors the
// infrastructure cluster's Ready (AzureManagedCluster /
// AzureASOManagedCluster), falling back to
// status.initialization.infrastructureProvisioned; ControlPlaneInitialized
// says the API server accepts requests (the kubeconfig Secret exists from
// then on); ControlPlaneAvailable mirrors the control plane's Available
// (AzureManagedControlPlane), falling back to ControlPlaneInitialized when
// the provider does not report it. Not waited for: Available (it includes
// WorkersAvailable and RemoteConnectionProbe; the MachinePools' ready
// replicas are checked directly) and TopologyReconciled.
func ReadyConditions() []string {
	return []string{"InfrastructureReady", "ControlPlaneInitialized", "ControlPlaneAvailable"}
}

// KubeconfigSecretName is the Secret CAPI's control plane provider writes
// for a workload cluster.
func KubeconfigSecretName(cluster string) string { return cluster + "-kubeconfig" }

// clusterObject mirrors the Cluster fields Provision writes.
type clusterObject struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   metadataObject `json:"metadata"`
	Spec       struct {
		Topology topologyObject `json:"topology"`
	} `json:"spec"`
}

type metadataObject struct {
	Name        string            `json:"name,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type topologyObject struct {
	ClassRef struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"classRef"`
	Version string `json:"version"`
	Workers struct {
		MachinePools []machinePoolTopology `json:"machinePools,omitempty"`
	} `json:"workers,omitzero"`
	Variables []variableObject `json:"variables,omitempty"`
}

type machinePoolTopology struct {
	Metadata metadataObject `json:"metadata,omitzero"`
	Class    string         `json:"class"`
	Name     string         `json:"name"`
	Replicas *int32         `json:"replicas,omitempty"`
}

type variableObject struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// clusterFor builds the Cluster for cs.
func (o *Options) clusterFor(cs ClusterSpec, role topology.Role) (*unstructured.Unstructured, error) {
	c := clusterObject{APIVersion: APIVersion, Kind: "Cluster"}
	c.Metadata = metadataObject{Name: cs.Name, Namespace: o.Namespace, Labels: map[string]string{}}
	maps.Copy(c.Metadata.Labels, o.Labels)
	maps.Copy(c.Metadata.Labels, cs.Labels)
	c.Metadata.Labels[LabelRole] = string(role)
	c.Metadata.Labels[LabelManager] = o.Manager.Name
	t := &c.Spec.Topology
	t.ClassRef.Name = o.ClusterClass.Name
	if o.ClusterClass.Namespace != o.Namespace {
		t.ClassRef.Namespace = o.ClusterClass.Namespace
	}
	t.Version = o.KubernetesVersion
	for _, mp := range o.pools(cs) {
		mpt := machinePoolTopology{Class: mp.Class, Name: mp.Name}
		if mp.MaxSize > 0 {
			mpt.Metadata.Annotations = map[string]string{
				AnnotationAutoscalerMin: strconv.Itoa(int(mp.MinSize)),
				AnnotationAutoscalerMax: strconv.Itoa(int(mp.MaxSize)),
			}
		} else {
			r := mp.Replicas
			mpt.Replicas = &r
		}
		t.Workers.MachinePools = append(t.Workers.MachinePools, mpt)
	}
	vars := maps.Clone(o.Variables)
	if vars == nil {
		vars = map[string]any{}
	}
	maps.Copy(vars, cs.Variables)
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		t.Variables = append(t.Variables, variableObject{Name: name, Value: vars[name]})
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("capz: Cluster %s/%s: %w", o.Namespace, cs.Name, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("capz: Cluster %s/%s: %w", o.Namespace, cs.Name, err)
	}
	return u, nil
}

// clusterStatus mirrors the Cluster status fields read here.
type clusterStatus struct {
	Conditions []metav1.Condition `json:"conditions"`
	Phase      string             `json:"phase"`
}

// machinePoolStatus mirrors the MachinePool status fields read here.
type machinePoolStatus struct {
	Replicas      *int32 `json:"replicas"`
	ReadyReplicas *int32 `json:"readyReplicas"`
	Phase         string `json:"phase"`
}

// statusOf decodes u's status into out.
func statusOf(u *unstructured.Unstructured, out any) error {
	st, ok := u.Object["status"]
	if !ok {
		return nil
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s/%s: status: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// newObject returns an empty unstructured object of gvk, for Get and List.
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
