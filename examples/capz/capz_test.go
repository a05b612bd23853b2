package capzexample

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/topology/capz"
	"github.com/multikueue-testkit/testkit/topology/existing"
)

// Environment variables of TestMultiKueueOnCAPZ.
const (
	// EnvManagement is the management cluster's kubeconfig file; without it
	// the test is skipped.
	EnvManagement = "MKTK_CAPZ_MANAGEMENT_KUBECONFIG"
	// EnvNamespace holds the Clusters; default "default".
	EnvNamespace = "MKTK_CAPZ_NAMESPACE"

	// Attach mode, when EnvManager is set: the Clusters exist, Kueue runs on
	// them; MKTK_ATTACH_MODE is adopt (default) or wire.
	EnvManager        = "MKTK_CAPZ_MANAGER"
	EnvWorkers        = "MKTK_CAPZ_WORKERS"         // comma-separated Cluster names, or
	EnvWorkerSelector = "MKTK_CAPZ_WORKER_SELECTOR" // a label selector on the Clusters

	// Provision mode, otherwise.
	EnvClusterClass = "MKTK_CAPZ_CLUSTER_CLASS"      // required, e.g. the aks-clusterclass flavor's
	EnvVersion      = "MKTK_CAPZ_KUBERNETES_VERSION" // required, e.g. v1.33.2
	EnvWorkerCount  = "MKTK_CAPZ_WORKER_COUNT"       // default 3
	EnvNamePrefix   = "MKTK_CAPZ_NAME_PREFIX"        // default "mktk": mktk-manager, mktk-worker-1...
	EnvVariables    = "MKTK_CAPZ_VARIABLES"          // a JSON object of spec.topology.variables
	EnvKeep         = "MKTK_CAPZ_KEEP_CLUSTERS"      // "1": leave the Clusters on Close
)

// kubeconfigProxy stands for CAPI's ClusterProxy of the bootstrap cluster.
type kubeconfigProxy struct {
	name string
	cfg  *rest.Config
	c    client.Client
}

func (p kubeconfigProxy) GetName() string             { return p.name }
func (p kubeconfigProxy) GetRESTConfig() *rest.Config { return p.cfg }
func (p kubeconfigProxy) GetClient() client.Client    { return p.c }

// TestMultiKueueOnCAPZ runs RunMultiKueue on the management cluster of
// $MKTK_CAPZ_MANAGEMENT_KUBECONFIG: on AKS it provisions for tens of
// minutes, so give `go test` a -timeout of 90m or more.
func TestMultiKueueOnCAPZ(t *testing.T) {
	path := os.Getenv(EnvManagement)
	if path == "" {
		t.Skipf("%s is not set: this example needs a CAPI management cluster with CAPZ and an AKS ClusterClass (see docs/capz.md)", EnvManagement)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("%s=%s: %v", EnvManagement, path, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := inputFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	in.Progress = os.Stderr
	RunMultiKueue(context.Background(), t, kubeconfigProxy{name: "bootstrap", cfg: cfg, c: c}, in)
}

func inputFromEnv() (Input, error) {
	ns := os.Getenv(EnvNamespace)
	if mgr := os.Getenv(EnvManager); mgr != "" {
		a := &capz.AttachOptions{Namespace: ns, Manager: mgr, WorkerSelector: os.Getenv(EnvWorkerSelector)}
		if w := os.Getenv(EnvWorkers); w != "" {
			for _, n := range strings.Split(w, ",") {
				a.Workers = append(a.Workers, strings.TrimSpace(n))
			}
		}
		switch m := existing.Mode(os.Getenv(existing.EnvAttachMode)); m {
		case "", existing.ModeAdopt, existing.ModeWire:
			a.Mode = m
		default:
			return Input{}, fmt.Errorf("%s=%q: use %q or %q", existing.EnvAttachMode, m, existing.ModeAdopt, existing.ModeWire)
		}
		return Input{Attach: a}, nil
	}
	o := &capz.Options{
		Namespace:         ns,
		ClusterClass:      capz.ClassRef{Name: os.Getenv(EnvClusterClass)},
		KubernetesVersion: os.Getenv(EnvVersion),
		KeepClusters:      os.Getenv(EnvKeep) == "1",
	}
	if o.ClusterClass.Name == "" || o.KubernetesVersion == "" {
		return Input{}, fmt.Errorf("provision mode needs %s and %s (or set %s to attach existing Clusters)", EnvClusterClass, EnvVersion, EnvManager)
	}
	n := 3
	if s := os.Getenv(EnvWorkerCount); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			return Input{}, fmt.Errorf("%s=%q: want a positive number", EnvWorkerCount, s)
		}
	}
	prefix := os.Getenv(EnvNamePrefix)
	if prefix == "" {
		prefix = "mktk"
	}
	o.Manager = capz.ClusterSpec{Name: prefix + "-manager"}
	for i := 1; i <= n; i++ {
		o.Workers = append(o.Workers, capz.ClusterSpec{Name: fmt.Sprintf("%s-worker-%d", prefix, i)})
	}
	if v := os.Getenv(EnvVariables); v != "" {
		if err := json.Unmarshal([]byte(v), &o.Variables); err != nil {
			return Input{}, fmt.Errorf("%s: not a JSON object: %v", EnvVariables, err)
		}
	}
	return Input{Provision: o}, nil
}

// The environment is read as documented; bad values name the variable.
func TestInputFromEnv(t *testing.T) {
	t.Setenv(EnvManager, "")
	t.Setenv(EnvClusterClass, "aks")
	t.Setenv(EnvVersion, "v1.33.2")
	t.Setenv(EnvWorkerCount, "3")
	t.Setenv(EnvVariables, `{"location":"westeurope"}`)
	in, err := inputFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if p := in.Provision; p == nil || len(p.Workers) != 3 || p.Workers[2].Name != "mktk-worker-3" || p.Variables["location"] != "westeurope" {
		t.Errorf("provision input %+v", in.Provision)
	}
	t.Setenv(EnvWorkerCount, "none")
	if _, err := inputFromEnv(); err == nil || !strings.Contains(err.Error(), EnvWorkerCount) {
		t.Errorf("err = %v; want %s named", err, EnvWorkerCount)
	}
	t.Setenv(EnvManager, "mgr")
	t.Setenv(EnvWorkerSelector, "role=worker")
	in, err = inputFromEnv()
	if err != nil || in.Attach == nil || in.Attach.Manager != "mgr" || in.Attach.WorkerSelector != "role=worker" {
		t.Errorf("attach input %+v, err %v", in.Attach, err)
	}
}

// The Ginkgo spec behind the e2e build tag (e2e_test.go) compiles: it is
// what a CAPZ suite runs, and `go test ./...` does not build it otherwise.
func TestE2ESpecBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go vet")
	}
	out, err := exec.Command("go", "vet", "-tags", "e2e", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go vet -tags e2e ./examples/capz: %v\n%s", err, out)
	}
}
