package scenario_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// BenchmarkStartup measures, in one run, the time for 1 manager + 3 workers
// to become Active with the clusters started in parallel (the default) and one
// after another, and reports the ratio. Binaries must be cached.
//
//	go test ./scenario -run '^$' -bench Startup -benchtime 1x
func BenchmarkStartup(b *testing.B) {
	ctx := context.Background()
	var par, seq time.Duration
	for i := 0; i < b.N; i++ {
		for _, sequential := range []bool{false, true} {
			start := time.Now()
			topo, err := local.New(ctx, topology.Options{Workers: 3}, local.Options{Sequential: sequential})
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			if err := topo.Close(ctx); err != nil {
				b.Fatal(err)
			}
			if sequential {
				seq += d
			} else {
				par += d
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(par.Seconds()/n, "parallel-s")
	b.ReportMetric(seq.Seconds()/n, "sequential-s")
	b.ReportMetric(seq.Seconds()/par.Seconds(), "seq/par")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkJobToFinished measures one Job from creation on the manager to its
// Workload being Finished on the manager, on 1 manager + 3 workers, with a
// 1s run time on the worker; it reports the latency and its ratio to the run
// time (the MultiKueue overhead factor).
//
//	go test ./scenario -run '^$' -bench JobToFinished -benchtime 5x
func BenchmarkJobToFinished(b *testing.B) {
	ctx := context.Background()
	topo, err := local.New(ctx, topology.Options{Workers: 3}, local.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer topo.Close(ctx)
	env, err := scenarioObserve(ctx, topo)
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	const run = time.Second
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		job := workload.NewJob(fmt.Sprintf("bench-%d", i), "default").Queue("user-queue").Requests("1", "1Gi").RunFor(run).Obj()
		start := time.Now()
		if err := topo.Manager.Client.Create(ctx, job); err != nil {
			b.Fatal(err)
		}
		if err := env.Check.Finished(ctx, job); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	per := total.Seconds() / float64(b.N)
	b.ReportMetric(per, "s/job")
	b.ReportMetric(per/run.Seconds(), "latency/runtime")
	b.ReportMetric(0, "ns/op")
}
