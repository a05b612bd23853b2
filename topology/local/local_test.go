package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"sigs.k8s.io/controller-runtime/pkg/client"

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

// TestTwoTopologiesAndLifecycle starts two topologies in one process at once
// (ports must not collide), then stops and restarts one worker's API server
// and Kueue, and finally checks that teardown leaves no process or directory.
func TestTwoTopologiesAndLifecycle(t *testing.T) {
	ctx := context.Background()
	topos := make([]*topology.Topology, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	// b serves Kueue's v1beta1 too and runs its API servers with a memory
	// limit; a keeps the defaults (v1beta2 only).
	lopts := []local.Options{{}, {ServeKueueV1beta1: true, APIServerEnv: []string{"GOMEMLIMIT=512MiB"}}}
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
	if n := apiServersWithEnv(b.Provider().(*local.Provider).Dir(), "GOMEMLIMIT=512MiB"); n != 2 {
		t.Errorf("%d of b's 2 kube-apiservers run with Options.APIServerEnv", n)
	}
	if n := apiServersWithEnv(a.Provider().(*local.Provider).Dir(), "GOMEMLIMIT=512MiB"); n != 0 {
		t.Errorf("%d of a's kube-apiservers run with b's Options.APIServerEnv", n)
	}

	w := a.Workers[0]
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "survives-restart"}}
	if err := w.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := w.Lifecycle.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err == nil {
		t.Fatal("API server still answers after StopAPIServer")
	}
	if err := w.Lifecycle.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err != nil {
		t.Fatalf("data lost across an API server restart: %v", err)
	}
	if err := w.Lifecycle.StopKueue(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Lifecycle.StartKueue(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitActive(ctx); err != nil {
		t.Fatalf("setup not Active after restarts: %v", err)
	}

	dir := a.Provider().(*local.Provider).Dir()
	if err := a.Close(ctx); err != nil {
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
	if err := b.WaitActive(ctx); err != nil {
		t.Fatalf("closing one topology disturbed the other: %v", err)
	}
}
