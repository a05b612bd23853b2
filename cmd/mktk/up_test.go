package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/multikueue-testkit/testkit/internal/poll"
)

// TestUp starts `mktk up --workers 1` as a user would, waits for the
// kubeconfigs it prints, lists namespaces with one (a plain client-go
// client, no kubectl), sends SIGINT and checks that mktk exits cleanly with
// none of its processes (etcd, kube-apiserver, kube-controller-manager) left
// and its temp directories gone.
func TestUp(t *testing.T) {
	bin := theBinary.get(t)
	ctx := context.Background()
	cmd := exec.Command(bin, "up", "--workers", "1", "--nodes", "2")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	out := readLines(stdout, nil)
	errOut := readLines(stderr, nil)
	line, err := out.waitFor(ctx, 3*time.Minute, "export KUBECONFIG=")
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, strings.Join(errOut.all(), "\n"))
	}
	t.Logf("up in %s; output:\n%s", time.Since(start).Round(time.Millisecond), strings.Join(out.all(), "\n"))
	mgrPath := strings.TrimPrefix(line, "export KUBECONFIG=")
	kcDir := filepath.Dir(mgrPath)
	var topoDir string
	for _, l := range out.all() {
		if rest, ok := strings.CutPrefix(l, "# logs: "); ok {
			topoDir, _, _ = strings.Cut(rest, "/<cluster>")
		}
	}
	paths := []string{mgrPath, filepath.Join(kcDir, "worker-1.kubeconfig")}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("kubeconfig %s: %v, mode %v; want 0600", p, err, st.Mode().Perm())
		}
	}
	if st, err := os.Stat(kcDir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("kubeconfig dir %s: %v; want 0700", kcDir, err)
	}
	for _, l := range append(out.all(), errOut.all()...) {
		if strings.Contains(l, "BEGIN") || strings.Contains(l, "client-key-data") {
			t.Errorf("output holds credentials: %q", l)
		}
	}
	// Both kubeconfigs at once, as the printed line suggests: each context
	// keeps its own credentials.
	for _, c := range []string{"manager", "worker-1"} {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{Precedence: paths}, &clientcmd.ConfigOverrides{CurrentContext: c}).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("context %s: list namespaces: %v", c, err)
		}
		t.Logf("context %s: %d namespaces", c, len(nss.Items))
		if len(nss.Items) == 0 {
			t.Errorf("context %s: no namespaces", c)
		}
		// kubectl get nodes: the worker's two KWOK Nodes, none on the manager.
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("context %s: list nodes: %v", c, err)
		}
		if want := map[string]int{"manager": 0, "worker-1": 2}[c]; len(nodes.Items) != want {
			t.Errorf("context %s: %d Nodes, want %d", c, len(nodes.Items), want)
		}
	}
	children := descendants(cmd.Process.Pid)
	var servers []int
	for pid, name := range children {
		if name == "etcd" || name == "kube-apiserver" {
			servers = append(servers, pid)
		}
	}
	t.Logf("children: %v", children)
	for _, want := range []string{"kube-scheduler", "kwok"} {
		if !slices.Contains(slices.Collect(maps.Values(children)), want) {
			t.Errorf("no %s among the children of mktk up --nodes 2", want)
		}
	}
	if len(servers) != 4 {
		t.Errorf("%d etcd/kube-apiserver children, want 4 (2 clusters)", len(servers))
	}

	stopAt := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err := <-waitErr:
		killed = true
		if err != nil {
			t.Errorf("mktk up exited with %v; stderr:\n%s", err, strings.Join(errOut.all(), "\n"))
		}
	case <-time.After(time.Minute):
		t.Fatal("mktk up did not exit within 1m of SIGINT")
	}
	t.Logf("stopped %s after SIGINT", time.Since(stopAt).Round(time.Millisecond))
	err = poll.Until(ctx, 10*time.Second, "no process of mktk up left", func(context.Context) error {
		for pid := range children {
			if alive(pid) {
				return fmt.Errorf("pid %d (%s) still runs", pid, children[pid])
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	for _, d := range []string{kcDir, topoDir} {
		if d == "" {
			t.Errorf("directory not printed")
			continue
		}
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left after exit (%v)", d, err)
		}
	}
}
