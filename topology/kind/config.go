package kind

import (
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/kind/nodeimage"
)

// WorkerTokenMaxExpiration is the kube-apiserver's
// --service-account-max-token-expiration on the workers, the value Kueue
// v0.17.0's own MultiKueue e2e gives its worker clusters
// (hack/testing/multikueue/worker-cluster.kind.yaml): the tokens MultiKueue
// uses to reach a worker may live that long.
const WorkerTokenMaxExpiration = "168h"

// workerTokenPatch is the kubeadm ClusterConfiguration patch that sets it.
// It names no apiVersion, so kind applies it whatever kubeadm API the node
// image uses (v1beta3 up to Kubernetes 1.35, v1beta4 from 1.36; kind v0.33.0
// converts the map form of extraArgs for v1beta4).
const workerTokenPatch = `kind: ClusterConfiguration
apiServer:
  extraArgs:
    service-account-max-token-expiration: "` + WorkerTokenMaxExpiration + `"
`

// kubeletCgroupV1Patch lets kubelet start on a cgroup v1 host: from
// Kubernetes 1.35 it refuses to unless its configuration says
// failCgroupV1: false (the machines this was written on mount cgroup v1;
// `mktk kind probe` says which a host has). On cgroup v2 it changes nothing.
const kubeletCgroupV1Patch = `kind: KubeletConfiguration
failCgroupV1: false
`

// ClusterConfig is the kind configuration (v1alpha4) of one cluster of the
// topology: a single control-plane node (it runs pods: kind removes the
// control-plane taint when there are no worker nodes) and, for a worker,
// the ServiceAccount token expiry patch of Kueue's e2e. The API server
// listens on 127.0.0.1 on a random port (kind's defaults, kept explicit);
// the manager reaches workers on the runtime's "kind" network by their
// control-plane container name. The node image is given to kind's Create
// separately (CreateWithNodeImage). Options.Configure, when set, is applied
// last.
func ClusterConfig(kindName, name string, role topology.Role, o Options) *v1alpha4.Cluster {
	cfg := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     kindName,
		Nodes:    []v1alpha4.Node{{Role: v1alpha4.ControlPlaneRole}},
		Networking: v1alpha4.Networking{
			APIServerAddress: "127.0.0.1",
			APIServerPort:    0,
		},
	}
	cfg.KubeadmConfigPatches = append(cfg.KubeadmConfigPatches, kubeletCgroupV1Patch)
	if role == topology.RoleWorker {
		cfg.KubeadmConfigPatches = append(cfg.KubeadmConfigPatches, workerTokenPatch)
	}
	if nodeimage.IsOffline(o.NodeImage) {
		// The offline image carries its own pod network (ptp, one node);
		// kind's default CNI, kindnetd, is an image it would pull.
		cfg.Networking.DisableDefaultCNI = true
		cfg.Networking.PodSubnet = nodeimage.PodSubnet
	}
	if o.Configure != nil {
		o.Configure(name, role, cfg)
	}
	return cfg
}
