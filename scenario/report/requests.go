package report

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// Counter counts HTTP requests per cluster. Its Wrap fits
// observe.Options.WrapTransport:
//
//	var n report.Counter
//	env, err := scenario.ObserveWith(ctx, topo, observe.Options{WrapTransport: n.Wrap})
type Counter struct {
	m sync.Map // cluster → *atomic.Int64
}

// Wrap returns rt counting each request under cluster.
func (c *Counter) Wrap(cluster string, rt http.RoundTripper) http.RoundTripper {
	v, _ := c.m.LoadOrStore(cluster, new(atomic.Int64))
	return countingTransport{n: v.(*atomic.Int64), next: rt}
}

// Count returns the requests counted for cluster.
func (c *Counter) Count(cluster string) int64 {
	if v, ok := c.m.Load(cluster); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

type countingTransport struct {
	n    *atomic.Int64
	next http.RoundTripper
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(r)
}
