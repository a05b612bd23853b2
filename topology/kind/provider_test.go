package kind

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/topology"
)

// A Provision that fails after it began creating clusters deletes each of
// them through kind, with the provider's own kubeconfig path (the user's
// ~/.kube/config is untouched), and leaves no temporary directory. The
// container runtime is the fake docker CLI: kind's Create fails at its first
// daemon query, as it does when the daemon goes away.
func TestFailedProvisionDeletesWhatItStartedAndLeavesNoTempDir(t *testing.T) {
	keepGoEnv(t) // HOME changes below
	log := fakeDocker(t, "no-kind")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	userKubeconfig := filepath.Join(home, ".kube", "config")
	if err := os.MkdirAll(filepath.Dir(userKubeconfig), 0o700); err != nil {
		t.Fatal(err)
	}
	before := []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: kind-mktk-manager\n  cluster:\n    server: https://127.0.0.1:1\ncontexts: []\nusers: []\n")
	if err := os.WriteFile(userKubeconfig, before, 0o600); err != nil {
		t.Fatal(err)
	}

	var progress bytes.Buffer
	topo, err := New(context.Background(), topology.Options{Workers: 2, Progress: &progress}, fakeOptions())
	if err == nil {
		topo.Close(context.Background())
		t.Fatal("New succeeded against a daemon that cannot run kind")
	}
	for _, name := range []string{"mktk-manager", "mktk-worker-1", "mktk-worker-2"} {
		if !strings.Contains(err.Error(), `creating cluster "`+name+`"`) {
			t.Errorf("error does not name cluster %s: %v", name, err)
		}
		deleted := false
		for _, c := range calls(t, log) {
			// kind's Delete lists the cluster's nodes to remove them.
			if strings.HasPrefix(c, "ps ") && strings.Contains(c, "label=io.x-k8s.kind.cluster="+name) {
				deleted = true
			}
		}
		if !deleted {
			t.Errorf("cluster %s was not deleted through kind; calls:\n%s", name, strings.Join(calls(t, log), "\n"))
		}
		if !strings.Contains(progress.String(), `creating kind cluster "`+name+`"`) {
			t.Errorf("no progress line for %s:\n%s", name, progress.String())
		}
	}
	if after, _ := os.ReadFile(userKubeconfig); !bytes.Equal(after, before) {
		t.Errorf("~/.kube/config changed:\n%s", after)
	}
	if _, err := os.Stat(userKubeconfig + ".lock"); !os.IsNotExist(err) {
		t.Errorf("kind touched ~/.kube/config's lock: %v", err)
	}
	left, _ := os.ReadDir(tmp)
	for _, e := range left {
		t.Errorf("left in TMPDIR: %s", e.Name())
	}
}

func TestCloseWithoutProvisionAndTwice(t *testing.T) {
	p := &Provider{}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Provision(context.Background(), topology.Spec{}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Provision after Close: %v", err)
	}
}

// A kind cluster that exists already is reused, and never deleted: not on a
// failed Provision, not on Close.
func TestReusedClusterIsNeverDeleted(t *testing.T) {
	log := fakeDocker(t, "has-manager")
	t.Setenv("TMPDIR", t.TempDir())
	var progress bytes.Buffer
	_, err := New(context.Background(), topology.Options{Workers: 1, Progress: &progress}, fakeOptions())
	if err == nil {
		t.Fatal("New succeeded against a daemon that cannot run kind")
	}
	if strings.Contains(err.Error(), `creating cluster "mktk-manager"`) {
		t.Errorf("the existing manager cluster was created again: %v", err)
	}
	if !strings.Contains(progress.String(), `kind cluster "mktk-manager" exists: reusing it`) {
		t.Errorf("no reuse line:\n%s", progress.String())
	}
	var deletedWorker bool
	for _, c := range calls(t, log) {
		if strings.Contains(c, "label=io.x-k8s.kind.cluster=mktk-manager") {
			t.Errorf("the reused cluster was touched: %q", c)
		}
		if strings.Contains(c, "label=io.x-k8s.kind.cluster=mktk-worker-1") {
			deletedWorker = true
		}
	}
	if !deletedWorker {
		t.Error("the worker this provider began to create was not deleted")
	}
}

// fakeOptions name a node image and load none, so that a provider over the
// stand-in docker builds nothing offline (prepareOffline) before kind runs.
func fakeOptions() Options {
	return Options{NodeImage: "kindest/node:v1.35.8", SkipImageLoad: true}
}

// On kind the ClusterProfile connector's plugin lives in Kueue's pod, at
// PluginCommand: the default connector says so; the kubeconfig Secret
// connector is unchanged, and a bad MKTK_CONNECTOR is still an error.
func TestDefaultConnectorPutsThePluginInThePod(t *testing.T) {
	p := &Provider{}
	t.Setenv(connect.EnvConnector, connect.ConnectorClusterProfile)
	c, err := p.DefaultConnector()
	if err != nil {
		t.Fatal(err)
	}
	if cp, ok := c.(connect.ClusterProfile); !ok || cp.PluginCommand != PluginCommand {
		t.Errorf("MKTK_CONNECTOR=%s: connector %#v, want a ClusterProfile with PluginCommand %q", connect.ConnectorClusterProfile, c, PluginCommand)
	}
	t.Setenv(connect.EnvConnector, connect.ConnectorKubeconfig)
	if c, err := p.DefaultConnector(); err != nil || c.Name() != (connect.KubeconfigSecret{}).Name() {
		t.Errorf("MKTK_CONNECTOR=%s: %v, %v", connect.ConnectorKubeconfig, c, err)
	}
	t.Setenv(connect.EnvConnector, "nope")
	if _, err := p.DefaultConnector(); err == nil || !strings.Contains(err.Error(), connect.EnvConnector) {
		t.Errorf("MKTK_CONNECTOR=nope: %v, want an error naming %s", err, connect.EnvConnector)
	}
}
