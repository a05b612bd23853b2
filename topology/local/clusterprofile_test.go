package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestClusterProfileGateInstallsTheCRDEverywhere starts a topology whose
// connector does not ask for ClusterProfiles but whose Kueue runs with the
// MultiKueueClusterProfile gate on, as every local topology started after a
// ClusterProfile one in the same process does (gates are process-global).
// Such a Kueue watches ClusterProfiles on every cluster, and without the CRD
// its MultiKueueCluster controller never syncs: measured, the manager's and
// the worker's Kueue exited after controller-runtime's 2-minute cache sync
// timeout ("failed to wait for multikueue_cluster caches to sync kind source:
// *v1alpha1.ClusterProfile"). So the provider installs the CRD on every
// cluster whose Kueue starts with the gate on; this checks it is there, and
// that the published configuration carries no exec plugin environment when
// no credentials provider is configured.
func TestClusterProfileGateInstallsTheCRDEverywhere(t *testing.T) {
	ctx := context.Background()
	topo, err := local.New(ctx, topology.Options{Workers: 1, Connector: connect.KubeconfigSecret{},
		Kueue: topology.KueueOptions{FeatureGates: map[string]bool{string(features.MultiKueueClusterProfile): true}}}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	for _, c := range topo.Clusters() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "clusterprofiles.multicluster.x-k8s.io"}, crd); err != nil {
			t.Errorf("cluster %q: ClusterProfile CRD: %v", c.Name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(topo.Provider().(*local.Provider).Dir(), topo.Manager.Name, "exec-plugin.kubeconfig")); !os.IsNotExist(err) {
		t.Errorf("exec plugin kubeconfig written without a credentials provider (stat: %v)", err)
	}
}

// TestClusterProfileExecPluginEnvironment: with the ClusterProfile connector
// the configuration Kueue loads gives the credentials provider
// KUBECONFIG=<manager dir>/exec-plugin.kubeconfig, and that file reaches the
// manager in Kueue's namespace (the secretreader reads its Secrets there).
// The topology itself becoming Active proves the plugin ran with it.
func TestClusterProfileExecPluginEnvironment(t *testing.T) {
	ctx := context.Background()
	topo, err := local.New(ctx, topology.Options{Workers: 1, Connector: connect.ClusterProfile{}}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	dir := topo.Provider().(*local.Provider).Dir()
	// The configuration the manager's Kueue process runs with.
	raw, err := os.ReadFile(filepath.Join(dir, topo.Manager.Name, "kueue", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg configapi.Configuration
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, topo.Manager.Name, "exec-plugin.kubeconfig")
	if cfg.MultiKueue == nil || cfg.MultiKueue.ClusterProfile == nil {
		t.Fatalf("multiKueue.clusterProfile = %+v, want one credentials provider", cfg.MultiKueue)
	}
	providers := cfg.MultiKueue.ClusterProfile.CredentialsProviders //nolint:staticcheck // what the library writes, accepted by every release
	if len(providers) == 0 {
		providers = cfg.MultiKueue.ClusterProfile.AccessProviders
	}
	if len(providers) != 1 {
		t.Fatalf("multiKueue.clusterProfile = %+v, want one credentials provider", cfg.MultiKueue.ClusterProfile)
	}
	env := providers[0].ExecConfig.Env
	if len(env) != 1 || env[0].Name != "KUBECONFIG" || env[0].Value != want {
		t.Errorf("exec env = %+v, want KUBECONFIG=%s", env, want)
	}
	kc, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Contexts []struct {
			Context struct{ Namespace string } `json:"context"`
		} `json:"contexts"`
		Clusters []struct {
			Cluster struct{ Server string } `json:"cluster"`
		} `json:"clusters"`
	}
	if err := yaml.Unmarshal(kc, &parsed); err != nil {
		t.Fatal(err)
	}
	if len(parsed.Contexts) != 1 || parsed.Contexts[0].Context.Namespace != topo.Spec.Kueue.Namespace ||
		len(parsed.Clusters) != 1 || parsed.Clusters[0].Cluster.Server != topo.Manager.Config.Host {
		t.Errorf("exec plugin kubeconfig: %+v, want the manager %s in namespace %s", parsed, topo.Manager.Config.Host, topo.Spec.Kueue.Namespace)
	}
}
