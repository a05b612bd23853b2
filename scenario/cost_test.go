package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// requestCounter counts the requests of each cluster's informers.
type requestCounter struct {
	mu    sync.Mutex
	byKey map[string]int
	total atomic.Int64
}

func (c *requestCounter) wrap(cluster string, rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.total.Add(1)
		c.mu.Lock()
		verb := "list"
		if r.URL.Query().Get("watch") == "true" {
			verb = "watch"
		}
		c.byKey[cluster+" "+verb+" "+r.URL.Path]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAssertionCostDoesNotGrowWithWorkloads runs N Jobs through 1 manager +
// 3 workers (N = $MKTK_COST_WORKLOADS, default 40), then counts the API
// requests that NoOrphans plus ExactlyOnceAdmitted over all of them issue.
// Both read the Observer's informer caches: through the Observer the count
// must be zero; through the topology's clients NoOrphans makes one metadata
// list per kind per worker (to bring the caches up to date) and one list of
// pods per worker, whatever N. The Observer's own requests must stay at a few
// lists and watches per kind and cluster, whatever N.
func TestAssertionCostDoesNotGrowWithWorkloads(t *testing.T) {
	n := 40
	if v := os.Getenv("MKTK_COST_WORKLOADS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("MKTK_COST_WORKLOADS=%q is not a positive number", v)
		}
	}
	ctx := context.Background()
	quota := topology.Quota{CPU: strconv.Itoa(n), Memory: strconv.Itoa(n) + "Gi"}
	topo, err := local.New(ctx, topology.Options{Workers: 3, WorkerQuota: quota}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	direct := &requestCounter{byKey: map[string]int{}}
	for _, c := range topo.Clusters() {
		cfg := rest.CopyConfig(c.Config)
		name := c.Name
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return direct.wrap(name, rt) })
		if c.Client, err = client.New(cfg, client.Options{Scheme: c.Client.Scheme(), Mapper: c.Client.RESTMapper()}); err != nil {
			t.Fatal(err)
		}
	}
	counter := &requestCounter{byKey: map[string]int{}}
	observing := time.Now()
	env, err := scenario.ObserveWith(ctx, topo, observe.Options{WrapTransport: counter.wrap})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()

	jobs := make([]*batchv1.Job, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 20)
	for i := range jobs {
		jobs[i] = workload.NewJob(fmt.Sprintf("cost-%d", i), "default").Queue("user-queue").Requests("100m", "100Mi").RunFor(0).Obj()
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := topo.Manager.Client.Create(ctx, jobs[i]); err != nil {
				errs[i] = err
				return
			}
			errs[i] = env.Check.Finished(ctx, jobs[i])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	before, directBefore := counter.total.Load(), direct.total.Load()
	start := time.Now()
	if err := env.Check.NoOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := env.Check.ExactlyOnceAdmitted(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	spent, spentDirect := counter.total.Load()-before, direct.total.Load()-directBefore
	t.Logf("%d finished workloads on 3 workers: NoOrphans + %d x ExactlyOnceAdmitted took %s and issued %d API requests through the Observer and %d through the topology's clients; the Observer issued %d in all since it started:",
		n, n, time.Since(start).Round(time.Millisecond), spent, spentDirect, before)
	// client-go's reflectors end each watch after 5 to 10 minutes and open a
	// new one: the Observer's requests grow with time, not with workloads.
	bound := 2 + int(time.Since(observing)/(5*time.Minute))
	counter.mu.Lock()
	for k, v := range counter.byKey {
		t.Logf("  %3d  %s", v, k)
		if v > bound {
			t.Errorf("%d requests for %s after %s: more than %d (a watch, re-opened every 5 minutes at most)", v, k, time.Since(observing).Round(time.Second), bound)
		}
	}
	counter.mu.Unlock()
	if spent != 0 {
		t.Errorf("the assertions issued %d API requests through the Observer; want 0 (they read the informer caches)", spent)
	}
	// NoOrphans: per worker, a metadata list of Workloads and of each job
	// kind, then the pods' list; its first try finds everything in place.
	if want := int64(len(topo.Workers) * (len(env.Obs.JobKinds()) + 2)); spentDirect > want {
		t.Errorf("the assertions issued %d API requests through the topology's clients; want at most %d (a list per kind and worker, and the pods')", spentDirect, want)
	}
}
