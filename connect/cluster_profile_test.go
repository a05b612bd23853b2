package connect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestClusterProfileWithoutKueueNeeds attaches a worker through a
// ClusterProfile on a topology whose Kueue did not get the connector's needs
// (started with the kubeconfig Secret connector; the ClusterProfile CRD
// installed, nothing else): the MultiKueueCluster turns Active=False with
// reason MultiKueueClusterProfileFeatureDisabled while the process-global gate
// is off (this test runs before any ClusterProfile topology of the package),
// or BadClusterProfile ("no credentials provider configured") once another
// topology of the process turned it on (-count=2, MKTK_CONNECTOR). Switching
// back to the kubeconfig Secret makes it Active again.
func TestClusterProfileWithoutKueueNeeds(t *testing.T) {
	ctx := context.Background()
	topo, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 1, Connector: connect.KubeconfigSecret{}, Progress: testlog.Writer(t)}, local.Options{ClusterProfileCRD: true})
	a := assert.Require(t, env.Check)
	a.SetupActive(ctx)

	w := topo.Workers[0]
	req := topology.ConnectRequest{Manager: topo.Manager, Worker: w, KueueNamespace: topo.Spec.Kueue.Namespace, Integrations: topo.Spec.Kueue.Integrations}
	src, err := connect.ClusterProfile{PluginCommand: "/not/used/by/connect"}.Connect(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// A Kueue binary runs with the gates its configuration says (Facts,
	// read from the cluster); the in-process Kueue with this process's.
	reason, why := "MultiKueueClusterProfileFeatureDisabled", "the gate is off in the manager's Kueue"
	if topo.Facts.FeatureGates[connect.ClusterProfileGate] || features.Enabled(features.MultiKueueClusterProfile) {
		reason, why = "BadClusterProfile", "the gate is on in the manager's Kueue, but it has no credentials provider"
	}
	t.Logf("expecting reason %s: %s", reason, why)
	old := setClusterSource(ctx, t, topo, w.Name, src)
	a.ClusterInactive(ctx, w.Name, reason)

	setClusterSource(ctx, t, topo, w.Name, old)
	a.ClusterActive(ctx, w.Name)
}

// TestClusterProfileDispatch is the connector's acceptance on real API
// servers: 1 manager + 2 workers attached only through ClusterProfiles (and
// the secretreader plugin) become Active, and a Job is admitted exactly once,
// nominations cleared, losers cleaned, status synced, finished, with no
// orphans. It also checks what the connector wrote: each MultiKueueCluster
// refers to a ClusterProfile (no kubeconfig), whose status carries the
// worker's server, CA and exec extension but not the token; the token appears
// in no log or file of the topology but the manager's etcd.
func TestClusterProfileDispatch(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	topo, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 2, Connector: connect.ClusterProfile{}, Progress: testlog.Writer(t)}, local.Options{})
	t.Logf("1 manager + 2 workers Active through ClusterProfiles and observed after %s", time.Since(start).Round(time.Millisecond))
	a := assert.For(t, env.Check)
	if !a.SetupActive(ctx) {
		t.FailNow()
	}

	mgr, ns := topo.Manager, topo.Spec.Kueue.Namespace
	var tokens []string
	for _, w := range topo.Workers {
		mkc := &kueue.MultiKueueCluster{}
		if err := mgr.Client.Get(ctx, client.ObjectKey{Name: w.Name}, mkc); err != nil {
			t.Fatal(err)
		}
		if ref := mkc.Spec.ClusterSource.ClusterProfileRef; ref == nil || ref.Name != w.Name || mkc.Spec.ClusterSource.KubeConfig != nil {
			t.Errorf("MultiKueueCluster %s clusterSource = %+v, want only clusterProfileRef %q", w.Name, mkc.Spec.ClusterSource, w.Name)
		}
		cp := &inventoryv1alpha1.ClusterProfile{}
		if err := mgr.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: w.Name}, cp); err != nil {
			t.Fatal(err)
		}
		if len(cp.Status.AccessProviders) != 1 {
			t.Fatalf("ClusterProfile %s/%s has %d access providers, want 1", ns, w.Name, len(cp.Status.AccessProviders))
		}
		ap := cp.Status.AccessProviders[0]
		if ap.Name != connect.SecretReaderProvider || ap.Cluster.Server != w.ServerForManager() || !bytes.Equal(ap.Cluster.CertificateAuthorityData, w.Config.CAData) {
			t.Errorf("ClusterProfile %s/%s access provider %q server %q, want %q at %q with the worker's CA",
				ns, w.Name, ap.Name, ap.Cluster.Server, connect.SecretReaderProvider, w.ServerForManager())
		}
		sec := &corev1.Secret{}
		if err := mgr.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "multikueue-" + w.Name + "-token"}, sec); err != nil {
			t.Fatal(err)
		}
		token := string(sec.Data[connect.TokenKey])
		if token == "" {
			t.Fatalf("Secret %s/multikueue-%s-token has no %q", ns, w.Name, connect.TokenKey)
		}
		tokens = append(tokens, token)
		raw, _ := json.Marshal(cp)
		if strings.Contains(string(raw), token) {
			t.Errorf("ClusterProfile %s/%s contains the worker token", ns, w.Name)
		}
	}

	job := workload.NewJob("through-profile", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(time.Second).Obj()
	if err := mgr.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	testtopo.DispatchedOnce(ctx, t, a, job)

	// Files of the topology: logs, the plugin's kubeconfig (mode 0600).
	dir := topo.Provider().(*local.Provider).Dir()
	plugin := filepath.Join(dir, mgr.Name, "exec-plugin.kubeconfig")
	if fi, err := os.Stat(plugin); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the plugin's kubeconfig %s: %v, %v; want mode 0600", plugin, fi, err)
	}
	checked := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if d != nil && d.IsDir() && (d.Name() == "etcd" || strings.HasSuffix(d.Name(), "-data")) {
				return filepath.SkipDir // etcd stores the Secret, as any cluster does
			}
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		for _, tok := range tokens {
			if bytes.Contains(raw, []byte(tok)) {
				t.Errorf("a worker token is in %s", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("no worker token in the %d files of the topology directory outside etcd", checked)
}

// setClusterSource replaces a MultiKueueCluster's clusterSource and returns
// the previous one.
func setClusterSource(ctx context.Context, t *testing.T, topo *topology.Topology, name string, src kueue.ClusterSource) kueue.ClusterSource {
	t.Helper()
	mkc := &kueue.MultiKueueCluster{}
	if err := topo.Manager.Client.Get(ctx, client.ObjectKey{Name: name}, mkc); err != nil {
		t.Fatal(err)
	}
	old := mkc.Spec.ClusterSource
	mkc.Spec.ClusterSource = src
	if err := topo.Manager.Client.Update(ctx, mkc); err != nil {
		t.Fatalf("cluster %q: update MultiKueueCluster %s: %v", topo.Manager.Name, name, err)
	}
	return old
}

// TestClusterProfileConnectBadInput: a worker whose rest config has no inline
// CA is refused before anything is written, with the field named.
func TestClusterProfileConnectBadInput(t *testing.T) {
	w := &topology.Cluster{Name: "w", Config: &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{CAFile: "/ca.crt"}}}
	_, err := connect.ClusterProfile{}.Connect(context.Background(), topology.ConnectRequest{Worker: w, Manager: &topology.Cluster{Name: "m"}, KueueNamespace: "kueue-system"})
	if err == nil || !strings.Contains(err.Error(), "Config.CAData") || !strings.Contains(err.Error(), `cluster "w"`) {
		t.Fatalf("want an error naming cluster \"w\" and Config.CAData, got %v", err)
	}
}

func TestFromEnv(t *testing.T) {
	env := func(connector, guard string) func(string) string {
		return func(k string) string {
			switch k {
			case connect.EnvConnector:
				return connector
			case connect.EnvGuard:
				return guard
			}
			return ""
		}
	}
	for v, want := range map[string]string{
		"": "kubeconfig-secret", "kubeconfig": "kubeconfig-secret", "kubeconfig-secret": "kubeconfig-secret",
		"clusterprofile": "cluster-profile", "cluster-profile": "cluster-profile",
	} {
		c, err := connect.FromEnv(env(v, ""))
		if err != nil || c.Name() != want {
			t.Errorf("%s=%q: got %v, %v; want %s", connect.EnvConnector, v, c, err, want)
		}
	}
	// The guard is opt-in.
	for guard, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true} {
		for _, conn := range []string{"", "clusterprofile"} {
			c, err := connect.FromEnv(env(conn, guard))
			var got bool
			switch c := c.(type) {
			case connect.KubeconfigSecret:
				got = c.Guard
			case connect.ClusterProfile:
				got = c.Guard
			}
			if err != nil || got != want {
				t.Errorf("%s=%q %s=%q: got %#v, %v; want Guard %v", connect.EnvConnector, conn, connect.EnvGuard, guard, c, err, want)
			}
		}
	}
	_, err := connect.FromEnv(env("kind", ""))
	if err == nil || !strings.Contains(err.Error(), connect.EnvConnector) || !strings.Contains(err.Error(), `"kind"`) {
		t.Errorf("want an error naming %s and the value, got %v", connect.EnvConnector, err)
	}
	_, err = connect.FromEnv(env("", "yes"))
	if err == nil || !strings.Contains(err.Error(), connect.EnvGuard) || !strings.Contains(err.Error(), `"yes"`) {
		t.Errorf("want an error naming %s and the value, got %v", connect.EnvGuard, err)
	}
}

// TestClusterProfileKueueNeeds: the needs name the CRD, the gate and a
// credentials provider that passes Kueue's configuration validation (command,
// apiVersion, interactiveMode; provideClusterInfo for secretreader).
func TestClusterProfileKueueNeeds(t *testing.T) {
	n, err := connect.ClusterProfile{PluginCommand: "/plugins/secretreader-plugin"}.KueueNeeds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// connect.ClusterProfileGate is Kueue's own gate name.
	if string(features.MultiKueueClusterProfile) != connect.ClusterProfileGate {
		t.Errorf("ClusterProfileGate %q, Kueue's gate %q", connect.ClusterProfileGate, features.MultiKueueClusterProfile)
	}
	if !n.ClusterProfileCRD || !n.FeatureGates[string(features.MultiKueueClusterProfile)] || len(n.CredentialsProviders) != 1 {
		t.Fatalf("needs = %+v", n)
	}
	p := n.CredentialsProviders[0]
	if p.Name != connect.SecretReaderProvider || p.ExecConfig.Command != "/plugins/secretreader-plugin" ||
		p.ExecConfig.APIVersion != connect.ExecAPIVersion || !p.ExecConfig.ProvideClusterInfo || p.ExecConfig.InteractiveMode != "Never" {
		t.Errorf("credentials provider = %+v", p)
	}
}
