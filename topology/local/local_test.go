package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

func TestMissingBinaryIsOneClearError(t *testing.T) {
	t.Setenv(assets.EnvAssets, t.TempDir())
	_, err := local.New(context.Background(), topology.Options{Workers: 1}, local.Options{})
	if !errors.Is(err, assets.ErrNotFound) || !strings.Contains(err.Error(), assets.EnvAssets) {
		t.Fatalf("want a not-found error naming %s, got %v", assets.EnvAssets, err)
	}
	t.Log(err)
}

func TestBadInputFailsBeforeStartingAnything(t *testing.T) {
	_, err := local.New(context.Background(), topology.Options{Workers: 21}, local.Options{})
	if err == nil || !strings.Contains(err.Error(), "Options.Workers") {
		t.Fatalf("got %v", err)
	}
	_, err = local.New(context.Background(), topology.Options{Workers: 1}, local.Options{APIServerEnv: []string{"GOMEMLIMIT"}})
	if err == nil || !strings.Contains(err.Error(), "Options.APIServerEnv[0]") {
		t.Fatalf("got %v", err)
	}
	_, err = local.New(context.Background(), topology.Options{Workers: 1}, local.Options{Etcd: "one"})
	if err == nil || !strings.Contains(err.Error(), "Options.Etcd") {
		t.Fatalf("got %v", err)
	}
}

// kueueVersions lists the versions of kueue.x-k8s.io the cluster's API
// server serves, comma-separated.
func kueueVersions(t *testing.T, c *topology.Cluster) string {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		t.Fatalf("cluster %q: discovery: %v", c.Name, err)
	}
	var vs []string
	for _, g := range groups.Groups {
		if g.Name == "kueue.x-k8s.io" {
			for _, v := range g.Versions {
				vs = append(vs, v.Version)
			}
		}
	}
	sort.Strings(vs)
	return strings.Join(vs, ",")
}

// apiServersWithEnv counts the kube-apiservers below dir whose environment
// holds kv.
func apiServersWithEnv(dir, kv string) int {
	n := 0
	for _, pid := range local.ProcessesUnder(dir) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if bytes.Contains(cmd, []byte("kube-apiserver")) && bytes.Contains(append(append([]byte{0}, env...), 0), []byte("\x00"+kv+"\x00")) {
			n++
		}
	}
	return n
}

// processesNamed counts the running processes below dir whose command line
// starts with a binary called name.
func processesNamed(dir, name string) int {
	n := 0
	for _, pid := range local.ProcessesUnder(dir) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if bin, _, _ := bytes.Cut(cmd, []byte{0}); filepath.Base(string(bin)) == name {
			n++
		}
	}
	return n
}

// TestTwoTopologiesAndLifecycle starts two topologies in one process at once
// (ports must not collide), one with an etcd per cluster and one whose
// clusters share an etcd, checks that the shared one keeps the clusters
// apart, stops and restarts a worker's API server and Kueue in each, and
// finally checks that teardown leaves no process or directory.
func TestTwoTopologiesAndLifecycle(t *testing.T) {
	ctx := context.Background()
	topos := make([]*topology.Topology, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	// b serves Kueue's v1beta1 too, runs its API servers with a memory
	// limit and shares one etcd; a keeps the defaults (v1beta2 only, an etcd
	// per cluster on a topology this small).
	// Both run the Kueue binary, with the chart's controller concurrency
	// (checkKueueConcurrency).
	bin := local.KueueOptions{Version: local.DefaultKueueVersion}
	lopts := []local.Options{{Kueue: bin}, {Kueue: bin, ServeKueueV1beta1: true, APIServerEnv: []string{"GOMEMLIMIT=512MiB"}, Etcd: local.EtcdShared}}
	for i := range topos {
		wg.Go(func() {
			topos[i], errs[i] = local.New(ctx, topology.Options{Workers: 1}, lopts[i])
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("topology %d: %v", i, err)
		}
		topos[i].CloseWith(t)
	}
	a, b := topos[0], topos[1]
	aDir, bDir := a.Provider().(*local.Provider).Dir(), b.Provider().(*local.Provider).Dir()
	if a.Manager.Config.Host == b.Manager.Config.Host || a.Workers[0].Config.Host == b.Workers[0].Config.Host {
		t.Fatalf("two topologies share an API server address")
	}
	for _, c := range []struct {
		topo *topology.Topology
		want string
	}{{a, "v1beta2"}, {b, "v1beta1,v1beta2"}} {
		for _, cl := range c.topo.Clusters() {
			if got := kueueVersions(t, cl); got != c.want {
				t.Errorf("cluster %q serves kueue.x-k8s.io at %s, want %s", cl.Name, got, c.want)
			}
		}
	}
	if n := apiServersWithEnv(bDir, "GOMEMLIMIT=512MiB"); n != 2 {
		t.Errorf("%d of b's 2 kube-apiservers run with Options.APIServerEnv", n)
	}
	if n := apiServersWithEnv(aDir, "GOMEMLIMIT=512MiB"); n != 0 {
		t.Errorf("%d of a's kube-apiservers run with b's Options.APIServerEnv", n)
	}
	if n := processesNamed(aDir, "etcd"); n != 2 {
		t.Errorf("a (an etcd per cluster) runs %d etcd processes, want 2", n)
	}
	if n := processesNamed(bDir, "etcd"); n != 1 {
		t.Errorf("b (Options.Etcd shared) runs %d etcd processes, want 1", n)
	}
	for _, topo := range topos {
		checkKueueConcurrency(t, ctx, topo)
	}

	// b's clusters share an etcd and still see nothing of each other: the
	// same name holds different data on each, and an object made on one is
	// not on the other.
	for _, cl := range b.Clusters() {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "same-name", Namespace: "default"}, Data: map[string]string{"cluster": cl.Name}}
		if err := cl.Client.Create(ctx, cm); err != nil {
			t.Fatalf("cluster %q: %v", cl.Name, err)
		}
	}
	for _, cl := range b.Clusters() {
		var cm corev1.ConfigMap
		if err := cl.Client.Get(ctx, client.ObjectKey{Name: "same-name", Namespace: "default"}, &cm); err != nil {
			t.Fatalf("cluster %q: %v", cl.Name, err)
		}
		if cm.Data["cluster"] != cl.Name {
			t.Errorf("cluster %q reads ConfigMap default/same-name written by %q", cl.Name, cm.Data["cluster"])
		}
	}
	only := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-on-the-worker"}}
	if err := b.Workers[0].Client.Create(ctx, only); err != nil {
		t.Fatal(err)
	}
	if err := b.Manager.Client.Get(ctx, client.ObjectKeyFromObject(only), &corev1.Namespace{}); err == nil {
		t.Errorf("namespace %s made on b's worker is on b's manager: the shared etcd mixes the clusters", only.Name)
	}

	for _, topo := range topos {
		w := topo.Workers[0]
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "survives-restart"}}
		if err := w.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		if err := w.Lifecycle.StopAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err == nil {
			t.Fatalf("cluster %q: API server still answers after StopAPIServer", w.Name)
		}
		if err := w.Lifecycle.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err != nil {
			t.Fatalf("cluster %q: data lost across an API server restart: %v", w.Name, err)
		}
		if err := w.Lifecycle.StopKueue(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.Lifecycle.StartKueue(ctx); err != nil {
			t.Fatal(err)
		}
		if err := topo.WaitActive(ctx); err != nil {
			t.Fatalf("setup not Active after restarts: %v", err)
		}
	}

	closeAndCheck := func(topo *topology.Topology, dir string) {
		t.Helper()
		if err := topo.Close(ctx); err != nil {
			t.Fatal(err)
		}
		err := poll.Until(ctx, 10*time.Second, "processes of the closed topology to be gone", func(context.Context) error {
			if left := local.ProcessesUnder(dir); len(left) > 0 {
				return errors.New("still running")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("directory %s survived Close", dir)
		}
	}
	closeAndCheck(a, aDir)
	if err := b.WaitActive(ctx); err != nil {
		t.Fatalf("closing one topology disturbed the other: %v", err)
	}
	closeAndCheck(b, bDir)
}

// checkKueueConcurrency checks that every cluster's Kueue process runs
// its Workload controllers (Kueue's and MultiKueue's) with the concurrency of the configuration the
// cluster publishes, which is the chart's (controller.groupKindConcurrency
// of Workload.kueue.x-k8s.io: 10 in v0.19.2), not controller-runtime's
// default of one. The figure comes from what runs: controller-runtime's
// "Starting workers" line in each Kueue's log.
func checkKueueConcurrency(t *testing.T, ctx context.Context, topo *topology.Topology) {
	t.Helper()
	dir := topo.Provider().(*local.Provider).Dir()
	for _, c := range topo.Clusters() {
		var cm corev1.ConfigMap
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: topo.Spec.Kueue.Namespace, Name: topology.KueueConfigMapName}, &cm); err != nil {
			t.Fatalf("cluster %q: %v", c.Name, err)
		}
		var cfg struct {
			Controller struct {
				GroupKindConcurrency map[string]int `json:"groupKindConcurrency"`
			} `json:"controller"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data[topology.KueueConfigKey]), &cfg); err != nil {
			t.Fatal(err)
		}
		want := cfg.Controller.GroupKindConcurrency["Workload.kueue.x-k8s.io"]
		if want < 2 {
			t.Fatalf("cluster %q: the published configuration sets Workload concurrency %d; the chart's is more", c.Name, want)
		}
		log, err := os.ReadFile(filepath.Join(dir, c.Name, "kueue.log"))
		if err != nil {
			t.Fatal(err)
		}
		// Kueue names its reconcilers' loggers (Workload: workload-reconciler;
		// MultiKueue's Workload: multikueue-workload).
		for _, ctrl := range []string{"workload-reconciler", "multikueue-workload"} {
			re := regexp.MustCompile(`"logger":"` + ctrl + `",.*"msg":"Starting workers".*"worker count":(\d+)`)
			m := re.FindSubmatch(log)
			if m == nil {
				if ctrl == "multikueue-workload" && c.Role == topology.RoleWorker {
					continue // MultiKueue's controllers run on the manager only
				}
				t.Errorf("cluster %q: kueue.log has no \"Starting workers\" line for %s", c.Name, ctrl)
				continue
			}
			if got, _ := strconv.Atoi(string(m[1])); got != want {
				t.Errorf("cluster %q: Kueue's %s runs %d workers, want %d (the chart's configuration)", c.Name, ctrl, got, want)
			}
		}
	}
}
