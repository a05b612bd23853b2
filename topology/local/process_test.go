package local

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/internal/assets"
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
