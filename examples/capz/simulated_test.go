package capzexample

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/capz"
	"github.com/multikueue-testkit/testkit/topology/capz/capztest"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// RunMultiKueue itself, on a simulated management cluster: the local
// manager carries CAPI's CRDs, an AKS-like ClusterClass and capztest's
// simulated CAPI/CAPZ controller, whose kubeconfig Secrets point at bare
// local clusters (Kueue running, so Kueue.Skip). Everything the example
// does after provisioning runs for real; what it cannot show is AKS.
func TestRunMultiKueueOnTheSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts three local clusters")
	}
	ctx := context.Background()
	mgr, workers := testtopo.Bare(ctx, t, topology.Options{Workers: 2, Connector: connect.KubeconfigSecret{}}, local.Options{})
	if err := capztest.InstallCRDs(ctx, mgr.Config); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Client.Create(ctx, capztest.AKSClusterClass("default", "aks-clusterclass")); err != nil {
		t.Fatal(err)
	}
	kcs := map[string][]byte{mgr.Name: mgr.Kubeconfig}
	for _, w := range workers {
		kcs[w.Name] = w.Kubeconfig
	}
	sim, err := capztest.Start(ctx, mgr.Config, kcs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sim.Stop(); err != nil {
			t.Error(err)
		}
	})
	artifacts := t.TempDir()
	t.Setenv("ARTIFACTS", artifacts)

	in := Input{
		Provision: &capz.Options{
			ClusterClass:      capz.ClassRef{Name: "aks-clusterclass"},
			KubernetesVersion: "v1.35.4",
			Manager:           capz.ClusterSpec{Name: mgr.Name},
			Workers:           []capz.ClusterSpec{{Name: workers[0].Name}, {Name: workers[1].Name}},
			PollInterval:      200 * time.Millisecond,
			DeleteTimeout:     time.Minute,
			Kueue:             capz.KueueInstall{Skip: true},
		},
		Jobs:     6,
		Progress: os.Stderr,
	}
	RunMultiKueue(ctx, t, kubeconfigProxy{name: "bootstrap", cfg: mgr.Config, c: mgr.Client}, in)

	for _, n := range []string{"manager", "worker-1", "worker-2"} {
		b, err := os.ReadFile(filepath.Join(artifacts, "multikueue-testkit", "capz", n+".yaml"))
		if err != nil || !strings.Contains(string(b), "kind: Cluster\n") || !strings.Contains(string(b), "kind: MachinePool\n") {
			t.Errorf("artifact of Cluster %s (err %v):\n%s", n, err, b)
		}
	}
}
