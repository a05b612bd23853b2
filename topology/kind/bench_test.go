package kind_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/syncwriter"
	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/scenario/report"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/kind"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// substrateRun is what BenchmarkKindBesideLocal measures of one topology.
type substrateRun struct {
	up     time.Duration    // New: clusters, Kueue, MultiKueue wired
	job    time.Duration    // one Job: create on the manager → Finished there
	memory map[string]int64 // bytes per cluster (local: its processes' PSS; kind: the node container's usage)
}

func (r substrateRun) meanMemory() float64 {
	var sum int64
	for _, m := range r.memory {
		sum += m
	}
	return float64(sum) / float64(max(1, len(r.memory)))
}

// BenchmarkKindBesideLocal stands up the local topology and then kind
// clusters, 1 manager + 3 workers each, in one run, and reports kind's cost
// as ratios to the local topology's: the topology up, memory per cluster,
// one Job's create → Finished; and kind's creation time per cluster. It
// needs MKTK_KIND=1 and the offline images (kind.Prepare builds them first,
// outside the measurement):
//
//	MKTK_KIND=1 go test ./topology/kind -run '^$' -bench KindBesideLocal -benchtime 1x -timeout 60m
func BenchmarkKindBesideLocal(b *testing.B) {
	rt := requireKind(b)
	ctx := context.Background()
	if err := kind.Prepare(ctx, kind.Options{}, testlog.Writer(b)); err != nil {
		b.Fatal(err)
	}
	if err := local.EnsureBinaries(ctx, local.Options{}); err != nil {
		b.Fatal(err)
	}
	// The topologies' progress is shown only when the benchmark fails: its
	// log keeps the numbers, which go test would cut off after the progress.
	var progress bytes.Buffer
	defer func() {
		if b.Failed() {
			b.Log(progress.String())
		}
	}()
	opts := topology.Options{Workers: 3, Progress: syncwriter.New(&progress)}
	for b.Loop() {
		loc := measure(ctx, b, "local", func() (*topology.Topology, error) { return local.New(ctx, opts, local.Options{}) },
			func(topo *topology.Topology) map[string]int64 {
				return report.MemoryByCluster(topo.Provider().(*local.Provider).Dir(), clusterNames(topo))
			})
		var creation map[string]time.Duration
		kin := measure(ctx, b, "kind", func() (*topology.Topology, error) {
			return kind.New(ctx, opts, kind.Options{NamePrefix: "mktk-bench-"})
		}, func(topo *topology.Topology) map[string]int64 {
			p := topo.Provider().(*kind.Provider)
			creation = p.CreationTimes()
			out := map[string]int64{}
			for _, name := range clusterNames(topo) {
				m, err := nodeMemory(ctx, rt.CLI, p.KindName(name)+"-control-plane")
				if err != nil {
					b.Errorf("cluster %q: %v", name, err)
					continue
				}
				out[name] = m
			}
			return out
		})
		if b.Failed() {
			return
		}
		names := slices.Sorted(maps.Keys(creation))
		var longest time.Duration
		for _, n := range names {
			b.Logf("kind cluster %s created in %s", n, creation[n].Round(100*time.Millisecond))
			longest = max(longest, creation[n])
		}
		b.Logf("1 + 3 up: local %s, kind %s (%.1fx; the kind clusters themselves, %d at a time: longest %s)",
			loc.up.Round(100*time.Millisecond), kin.up.Round(100*time.Millisecond), ratio(kin.up, loc.up), kind.DefaultParallel, longest.Round(100*time.Millisecond))
		b.Logf("memory per cluster: local %.0f MiB, kind %.0f MiB (%.1fx)", loc.meanMemory()/(1<<20), kin.meanMemory()/(1<<20), kin.meanMemory()/max(1, loc.meanMemory()))
		b.Logf("one Job create → Finished: local %s, kind %s (%.1fx)", loc.job.Round(10*time.Millisecond), kin.job.Round(10*time.Millisecond), ratio(kin.job, loc.job))
		b.ReportMetric(ratio(kin.up, loc.up), "kind/local-up")
		b.ReportMetric(kin.meanMemory()/max(1, loc.meanMemory()), "kind/local-memory")
		b.ReportMetric(ratio(kin.job, loc.job), "kind/local-job")
		b.ReportMetric(longest.Seconds(), "kind-cluster-s")
	}
}

// measure stands up one topology with up, runs one Job through it, reads
// its memory with mem, and closes it.
func measure(ctx context.Context, b *testing.B, what string, up func() (*topology.Topology, error), mem func(*topology.Topology) map[string]int64) substrateRun {
	b.Helper()
	var r substrateRun
	start := time.Now()
	topo, err := up()
	if err != nil {
		b.Fatalf("%s: %v", what, err)
	}
	defer topo.Close(context.Background())
	r.up = time.Since(start)
	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		b.Fatalf("%s: %v", what, err)
	}
	defer env.Close()
	a := assert.For(b, env.Check)
	a.SetupActive(ctx)
	q, size := topo.Spec.Queues, topo.JobSize()
	job := workload.NewJob("bench-"+what, q.Namespaces[0]).Queue(q.LocalQueue).Requests(size.CPU, size.Memory).RunFor(time.Second).Obj()
	start = time.Now()
	if err := topo.Manager.Client.Create(ctx, job); err != nil {
		b.Fatalf("%s: %v", what, err)
	}
	if !a.Finished(ctx, job) {
		return r
	}
	r.job = time.Since(start)
	r.memory = mem(topo)
	return r
}

func clusterNames(topo *topology.Topology) []string {
	var names []string
	for _, c := range topo.Clusters() {
		names = append(names, c.Name)
	}
	return names
}

func ratio(a, b time.Duration) float64 { return a.Seconds() / max(b.Seconds(), 1e-9) }

// nodeMemory is a node container's memory usage as the engine reports it.
func nodeMemory(ctx context.Context, cli, container string) (int64, error) {
	out, err := exec.CommandContext(ctx, cli, "stats", "--no-stream", "--format", "{{.MemUsage}}", container).Output()
	if err != nil {
		return 0, fmt.Errorf("%s stats %s: %w", cli, container, err)
	}
	return parseMemUsage(string(out))
}

// parseMemUsage reads the usage of docker stats' MemUsage ("1.2GiB / 23.5GiB").
func parseMemUsage(s string) (int64, error) {
	used, _, _ := strings.Cut(strings.TrimSpace(s), "/")
	used = strings.TrimSpace(used)
	units := []struct {
		suffix string
		mult   float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"B", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(used, u.suffix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil {
				return 0, fmt.Errorf("memory usage %q: %w", s, err)
			}
			return int64(f * u.mult), nil
		}
	}
	return 0, fmt.Errorf("memory usage %q: no unit", s)
}

func TestParseMemUsage(t *testing.T) {
	for in, want := range map[string]int64{
		"1.5GiB / 23.47GiB": 3 << 29,
		"512MiB / 2GiB":     512 << 20,
		"900kB / 1GB":       900e3,
		"12B / 1GiB":        12,
	} {
		if got, err := parseMemUsage(in); err != nil || got != want {
			t.Errorf("parseMemUsage(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseMemUsage("--"); err == nil {
		t.Error(`parseMemUsage("--"): no error`)
	}
}
