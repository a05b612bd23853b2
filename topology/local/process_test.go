package local

import (
	"sync"
	"testing"
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
