package assets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// NodeBinaries are the Kubernetes binaries a kind node carries besides the
// control plane's (which run in containers): kubelet, kubeadm, kubectl, and
// kube-proxy (which runs in a container too, but has no other source here).
type NodeBinaries struct {
	Kubelet, Kubeadm, Kubectl, KubeProxy string
}

// nodeComponents are the binaries of NodeBinaries, each cached per
// Kubernetes version in a directory of its own, as kube-controller-manager.
func nodeComponents() []kubeComponent {
	const cost = "this takes a few minutes on 2 cores, less once kube-apiserver was built with a warm build cache"
	return []kubeComponent{
		{name: "kubelet", pkg: "k8s.io/kubernetes/cmd/kubelet", env: "MKTK_KUBELET", cost: cost},
		{name: "kubeadm", pkg: "k8s.io/kubernetes/cmd/kubeadm", env: "MKTK_KUBEADM", cost: cost},
		{name: "kubectl", pkg: "k8s.io/kubernetes/cmd/kubectl", env: "MKTK_KUBECTL", cost: cost},
		{name: "kube-proxy", pkg: "k8s.io/kubernetes/cmd/kube-proxy", env: "MKTK_KUBE_PROXY", cost: cost},
	}
}

// EnsureNodeBinaries returns kubelet, kubeadm, kubectl and kube-proxy of
// the Kubernetes version: each from $MKTK_<NAME> (MKTK_KUBELET, ...),
// $KUBEBUILDER_ASSETS/<name>, the cache, else a build into the cache from
// one throwaway module of k8s.io/kubernetes (under the cache's lock). Only
// the kind node image needs them.
func EnsureNodeBinaries(ctx context.Context, opts Options) (NodeBinaries, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return NodeBinaries{}, err
	}
	comps := nodeComponents()
	paths, missing, err := findComponents(o, comps)
	if err != nil || len(missing) == 0 {
		return nodeBinaries(paths), err
	}
	if o.NoBuild {
		return NodeBinaries{}, fmt.Errorf("%w: no %s %s in %s and building is disabled; set %s", ErrNotFound, missing[0].name, o.KubernetesVersion, o.componentDir(missing[0]), missing[0].env)
	}
	unlock, err := LockDir(ctx, o.CacheDir)
	if err != nil {
		return NodeBinaries{}, fmt.Errorf("assets: lock %s: %w", o.CacheDir, err)
	}
	defer unlock()
	// Another process may have built them while we waited.
	if paths, missing, err = findComponents(o, comps); err != nil || len(missing) == 0 {
		return nodeBinaries(paths), err
	}
	work, err := os.MkdirTemp("", "mktk-node-build-")
	if err != nil {
		return NodeBinaries{}, err
	}
	defer os.RemoveAll(work)
	kubeMod := filepath.Join(work, "kubernetes")
	var pkgs []string
	for _, c := range missing {
		pkgs = append(pkgs, c.pkg)
	}
	if err := prepareKubeModuleFor(ctx, o, kubeMod, "the node binaries", pkgs...); err != nil {
		return NodeBinaries{}, fmt.Errorf("%w: preparing the k8s.io/kubernetes %s module failed: %v; %s", ErrNotFound, o.KubernetesVersion, err, hint())
	}
	for _, c := range missing {
		p, err := buildComponent(ctx, o, c, kubeMod)
		if err != nil {
			return NodeBinaries{}, err
		}
		paths[c.name] = p
	}
	return nodeBinaries(paths), nil
}

// findComponents looks each of comps up (findComponent); missing are those
// a build must fill.
func findComponents(o Options, comps []kubeComponent) (paths map[string]string, missing []kubeComponent, err error) {
	paths = map[string]string{}
	for _, c := range comps {
		p, err := findComponent(o, c)
		if err != nil {
			return nil, nil, err
		}
		if p == "" {
			missing = append(missing, c)
			continue
		}
		paths[c.name] = p
	}
	return paths, missing, nil
}

func nodeBinaries(paths map[string]string) NodeBinaries {
	return NodeBinaries{Kubelet: paths["kubelet"], Kubeadm: paths["kubeadm"], Kubectl: paths["kubectl"], KubeProxy: paths["kube-proxy"]}
}

// The node image's tools, each built from its Go module like an operator.

// CRICtl is cri-tools' crictl, which kind's node image carries for
// kubeadm and for debugging.
func CRICtl() OperatorSpec {
	return OperatorSpec{Name: "crictl", Module: "sigs.k8s.io/cri-tools", Package: "sigs.k8s.io/cri-tools/cmd/crictl"}
}

// CNIPlugins are the reference CNI plugins a single-node kind cluster's pod
// network needs (ptp with host-local addresses, loopback, portmap: what kind's own base image carries),
// each cached as cni-<name>; the node image installs them as
// /opt/cni/bin/<name>.
func CNIPlugins() []OperatorSpec {
	const mod = "github.com/containernetworking/plugins"
	var out []OperatorSpec
	for _, p := range []string{"main/ptp", "main/loopback", "ipam/host-local", "meta/portmap"} {
		out = append(out, OperatorSpec{Name: "cni-" + filepath.Base(p), Module: mod, Package: mod + "/plugins/" + p})
	}
	return out
}

// CoreDNS is the cluster DNS server kubeadm deploys.
func CoreDNS() OperatorSpec {
	return OperatorSpec{Name: "coredns", Module: "github.com/coredns/coredns", Package: "github.com/coredns/coredns"}
}
