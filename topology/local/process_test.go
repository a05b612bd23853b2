package local

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/internal/poll"
)

// TestPortPoolNeverGivesAPortTwice: ports handed out but not yet bound are
// free to the kernel, which may offer them again; the pool must not.
func TestPortPoolNeverGivesAPortTwice(t *testing.T) {
	var pool portPool
	const n = 400
	got := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			port, err := pool.free()
			if err != nil {
				t.Error(err)
			}
			got[i] = port
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, p := range got {
		if p == 0 || seen[p] {
			t.Fatalf("port %d given twice or not at all", p)
		}
		seen[p] = true
	}
}

// TestEtcdIsKnownByItsMemberName: startEtcd accepts the etcd on its port
// only when it is the member it started, so an etcd of another topology
// that won the port race is refused as errPortInUse (and the start retried
// on a fresh port), not used.
func TestEtcdIsKnownByItsMemberName(t *testing.T) {
	ctx := context.Background()
	bins, err := assets.Ensure(ctx, assets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pool portPool
	port, err := pool.free()
	if err != nil {
		t.Fatal(err)
	}
	p, member := newEtcd("a", t.TempDir(), bins.Etcd, port, &pool)
	if err := startEtcd(ctx, p, port, member, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.stop(procStopTimeout) })
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	if err := isEtcdMember(hc, etcdClientURL(port), member); err != nil {
		t.Errorf("member %s: %v", member, err)
	}
	if err := isEtcdMember(hc, etcdClientURL(port), "mktk-someone-else"); !errors.Is(err, errPortInUse) {
		t.Errorf("another member's name: got %v, want errPortInUse", err)
	}
}

// TestProcessRunsWithItsOwnHostname: a process given a host name sees it
// (os.Hostname, what controller-runtime puts first in a Lease holder
// identity), and the test process keeps its own.
func TestProcessRunsWithItsOwnHostname(t *testing.T) {
	own, _ := os.Hostname()
	dir := t.TempDir()
	p := &process{name: "hostname", path: "/bin/sh", args: []string{"-c", "cat /proc/sys/kernel/hostname"}, dir: dir,
		logPath: filepath.Join(dir, "out.log"), hostname: "kueue-7"}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	defer p.stop(procStopTimeout)
	var out string
	if err := poll.Until(t.Context(), 10*time.Second, "the child to print its host name", func(context.Context) error {
		raw, _ := os.ReadFile(p.logPath)
		if out = strings.TrimSpace(string(raw)); out == "" {
			return errEmpty
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if out != "kueue-7" {
		t.Errorf("the child's host name is %q, want kueue-7", out)
	}
	if now, _ := os.Hostname(); now != own {
		t.Errorf("the test process's host name changed from %q to %q", own, now)
	}
}

var errEmpty = errors.New("nothing printed yet")
