package kind

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
	"github.com/multikueue-testkit/testkit/topology"
)

// clusterConfigPatch is the part of a kubeadm ClusterConfiguration patch
// this package sets.
type clusterConfigPatch struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	APIServer  struct {
		ExtraArgs extraArgs `json:"extraArgs"`
	} `json:"apiServer"`
}

// extraArgs reads kubeadm's extraArgs in either form: a map (v1beta3, and
// the form this package writes, which kind converts) or a list of
// name/value pairs (v1beta4, as Kueue v0.19's own kind configs write).
type extraArgs map[string]string

func (a *extraArgs) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err == nil {
		*a = m
		return nil
	}
	var list []struct{ Name, Value string }
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*a = extraArgs{}
	for _, kv := range list {
		(*a)[kv.Name] = kv.Value
	}
	return nil
}

// tokenExpiry returns the service-account-max-token-expiration that the
// ClusterConfiguration patches of a kind config set, and whether one does.
func tokenExpiry(t *testing.T, patches []string) (string, bool) {
	t.Helper()
	for _, p := range patches {
		var c clusterConfigPatch
		if err := yaml.Unmarshal([]byte(p), &c); err != nil {
			t.Fatalf("patch does not parse: %v\n%s", err, p)
		}
		if c.Kind != "ClusterConfiguration" {
			continue
		}
		if v, ok := c.APIServer.ExtraArgs["service-account-max-token-expiration"]; ok {
			return v, true
		}
	}
	return "", false
}

// kueueE2EConfig reads one of the pinned Kueue's own MultiKueue kind configs
// from the module cache.
func kueueE2EConfig(t *testing.T, file string) *v1alpha4.Cluster {
	t.Helper()
	dir, err := modsrc.Dir(context.Background(), modsrc.Kueue)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "hack", "testing", "multikueue", file))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &v1alpha4.Cluster{}
	if err := yaml.Unmarshal(raw, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestWorkerTokenExpiryIsKueueE2Es(t *testing.T) {
	// Kueue's e2e sets it on the workers' control plane, not on the manager.
	kw := kueueE2EConfig(t, "worker-cluster.kind.yaml")
	want, ok := tokenExpiry(t, kw.Nodes[0].KubeadmConfigPatches)
	if !ok {
		t.Fatal("Kueue's worker-cluster.kind.yaml sets no service-account-max-token-expiration: re-read it")
	}
	if want != WorkerTokenMaxExpiration {
		t.Errorf("WorkerTokenMaxExpiration = %q, Kueue's e2e uses %q", WorkerTokenMaxExpiration, want)
	}
	if _, ok := tokenExpiry(t, kueueE2EConfig(t, "manager-cluster.kind.yaml").Nodes[0].KubeadmConfigPatches); ok {
		t.Error("Kueue's manager-cluster.kind.yaml sets a token expiry too: give the manager the patch as well")
	}

	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	w := ClusterConfig("mktk-worker-1", "worker-1", topology.RoleWorker, o)
	got, ok := tokenExpiry(t, w.KubeadmConfigPatches)
	if !ok || got != want {
		t.Errorf("worker config: token expiry %q (set: %v), want %q", got, ok, want)
	}
	// No apiVersion: kind applies the patch to v1beta3 (1.35) and v1beta4
	// (1.36+) kubeadm configurations alike.
	for _, raw := range w.KubeadmConfigPatches {
		var p clusterConfigPatch
		if err := yaml.Unmarshal([]byte(raw), &p); err != nil {
			t.Fatal(err)
		}
		if p.APIVersion != "" {
			t.Errorf("%s patch names apiVersion %q; it would not apply to other kubeadm API versions", p.Kind, p.APIVersion)
		}
	}
	m := ClusterConfig("mktk-manager", "manager", topology.RoleManager, o)
	if _, ok := tokenExpiry(t, m.KubeadmConfigPatches); ok {
		t.Error("manager config sets a token expiry; Kueue's e2e does not")
	}
}

func TestClusterConfigShape(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfg := ClusterConfig("mktk-worker-2", "worker-2", topology.RoleWorker, o)
	if cfg.Kind != "Cluster" || cfg.APIVersion != "kind.x-k8s.io/v1alpha4" {
		t.Errorf("TypeMeta = %+v", cfg.TypeMeta)
	}
	if cfg.Name != "mktk-worker-2" {
		t.Errorf("Name = %q", cfg.Name)
	}
	if len(cfg.Nodes) != 1 || cfg.Nodes[0].Role != v1alpha4.ControlPlaneRole {
		t.Errorf("Nodes = %+v, want one control-plane node", cfg.Nodes)
	}
	if cfg.Networking.APIServerAddress != "127.0.0.1" || cfg.Networking.APIServerPort != 0 {
		t.Errorf("Networking = %+v, want 127.0.0.1 on a random port", cfg.Networking)
	}
	// kind's defaulting keeps what we set and the YAML form round-trips.
	def := cfg.DeepCopy()
	v1alpha4.SetDefaultsCluster(def)
	if def.Networking.APIServerAddress != "127.0.0.1" || len(def.KubeadmConfigPatches) != 2 || len(def.Nodes) != 1 {
		t.Errorf("after kind's defaults: %+v", def)
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	back := &v1alpha4.Cluster{}
	if err := yaml.Unmarshal(raw, back); err != nil {
		t.Fatal(err)
	}
	if got, _ := tokenExpiry(t, back.KubeadmConfigPatches); got != WorkerTokenMaxExpiration {
		t.Errorf("round-tripped YAML lost the patch:\n%s", raw)
	}
	if !strings.Contains(string(raw), "apiVersion: kind.x-k8s.io/v1alpha4") {
		t.Errorf("YAML:\n%s", raw)
	}
}

// TestClusterConfigKubeletOnCgroupV1 checks every cluster's kubelet may
// start on a cgroup v1 host (kubelet 1.35+ refuses unless told), and that
// the offline node image gets its own pod network instead of kindnetd.
func TestClusterConfigKubeletOnCgroupV1(t *testing.T) {
	for _, image := range []string{"kindest/node:v1.35.8", "mktk.local/kind-node:v1.36.3-0123456789ab"} {
		for _, role := range []topology.Role{topology.RoleManager, topology.RoleWorker} {
			cfg := ClusterConfig("mktk-x", "x", role, Options{NodeImage: image})
			found := false
			for _, raw := range cfg.KubeadmConfigPatches {
				var p struct {
					Kind         string `json:"kind"`
					FailCgroupV1 *bool  `json:"failCgroupV1"`
				}
				if err := yaml.Unmarshal([]byte(raw), &p); err != nil {
					t.Fatal(err)
				}
				if p.Kind == "KubeletConfiguration" && p.FailCgroupV1 != nil && !*p.FailCgroupV1 {
					found = true
				}
			}
			if !found {
				t.Errorf("%s %s: no KubeletConfiguration patch with failCgroupV1: false in %q", image, role, cfg.KubeadmConfigPatches)
			}
			offline := strings.HasPrefix(image, "mktk.local/")
			if cfg.Networking.DisableDefaultCNI != offline {
				t.Errorf("%s: DisableDefaultCNI = %v, want %v", image, cfg.Networking.DisableDefaultCNI, offline)
			}
			if offline && cfg.Networking.PodSubnet != "10.244.0.0/16" {
				t.Errorf("%s: PodSubnet = %q, want the node image's 10.244.0.0/16", image, cfg.Networking.PodSubnet)
			}
		}
	}
}

func TestClusterConfigCustomize(t *testing.T) {
	var gotName string
	var gotRole topology.Role
	o, err := Options{Configure: func(name string, role topology.Role, cfg *v1alpha4.Cluster) {
		gotName, gotRole = name, role
		cfg.Nodes = append(cfg.Nodes, v1alpha4.Node{Role: v1alpha4.WorkerRole})
		cfg.FeatureGates = map[string]bool{"SomeGate": true}
	}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfg := ClusterConfig("mktk-manager", "manager", topology.RoleManager, o)
	if gotName != "manager" || gotRole != topology.RoleManager {
		t.Errorf("Configure called with %q, %q", gotName, gotRole)
	}
	if len(cfg.Nodes) != 2 || !cfg.FeatureGates["SomeGate"] {
		t.Errorf("Configure's changes lost: %+v", cfg)
	}
}
