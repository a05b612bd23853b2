package scenario_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestStressSmall is the CI-sized stress scenario: 60 Jobs submitted at
// once to 3 workers that run 12 at a time, every assertion over every
// workload. BenchmarkStress is the full-size one.
func TestStressSmall(t *testing.T) {
	env := mixed.get(t)
	res, _ := scenario.For(t, env).Stress(context.Background(), scenario.StressOptions{Dispatch: scenario.DispatchOptions{Jobs: 60, NamePrefix: "stress-ci"}})
	logStress(t, res)
}

// TestStressAmple is the throughput shape at CI size: quota for every
// workload at once on the manager and on each worker, no exhaustion looked
// for; and the shape is refused where the quota does not fit them all.
func TestStressAmple(t *testing.T) {
	env := mixed.get(t)
	ctx := context.Background()
	_, err := scenario.Stress(ctx, env, scenario.StressOptions{Dispatch: scenario.DispatchOptions{Jobs: 60, NamePrefix: "ample-refused"}, Ample: true})
	if err == nil || !strings.Contains(err.Error(), "StressOptions.Ample: the manager's quota fits 12 of the 60 Workloads") {
		t.Fatalf("Ample with 60 Jobs of 1 CPU on a manager that fits 12: got %v, want the refusal naming StressOptions.Ample", err)
	}
	res, _ := scenario.For(t, env).Stress(ctx, scenario.StressOptions{Dispatch: scenario.DispatchOptions{Jobs: 12, CPU: "100m", Memory: "10Mi", RunFor: time.Millisecond, NamePrefix: "ample-ci"}, Ample: true})
	logStress(t, res)
	if res.Exhausted != "" {
		t.Errorf("an Ample run reports an exhaustion: %s", res.Exhausted)
	}
}

func logStress(tb testing.TB, res scenario.StressResult) {
	tb.Helper()
	tb.Logf("%d workloads on %d workers (manager fits %d, workers %d): submitted in %s, all Finished after %s; %d queued at most; exhausted %s",
		len(res.Objects), res.Workers, res.ManagerSlots, res.WorkerSlots, res.Submit.Round(time.Millisecond), res.Run.Round(time.Millisecond), res.PeakQueued, res.Exhausted)
	for _, c := range res.Assertions {
		tb.Logf("  %-20s %4d calls, %3d failed, %9s in all, %9s per call", c.Name, c.Calls, c.Failed, c.Total.Round(time.Millisecond), c.PerCall().Round(time.Microsecond))
	}
	tb.Logf("  judging took %s; remote Jobs per worker %v", res.Judging().Round(time.Millisecond), res.PerWorker())
	tb.Logf("  the manager showed each remote job's final state %s after it (median; longest %s, %d read); MultiKueue removed the remote copies %s after the run",
		res.SyncLag.Median.Round(time.Millisecond), res.SyncLag.Max.Round(time.Millisecond), res.SyncLag.Measured, res.Cleanup.Round(time.Millisecond))
}

// BenchmarkStress runs the stress scenario at full size on its own
// topology: $MKTK_STRESS_WORKLOADS (default 500) Jobs of 1 CPU submitted at
// once to $MKTK_STRESS_WORKERS (default 3) workers of 20 CPU each (60 run
// at once), every assertion over every workload. It reports the run's
// duration and each assertion's cost per call. Not in the CI path:
//
//	go test ./scenario -run '^$' -bench Stress -benchtime 1x -timeout 60m
func BenchmarkStress(b *testing.B) {
	n := envInt(b, "MKTK_STRESS_WORKLOADS", 500)
	workers := envInt(b, "MKTK_STRESS_WORKERS", 3)
	ctx := context.Background()
	start := time.Now()
	_, env := testtopo.StartObserved(ctx, b, topology.Options{Workers: workers, WorkerQuota: topology.Quota{CPU: "20", Memory: "40Gi"}}, local.Options{})
	b.Logf("%d workers Active and observed after %s", workers, time.Since(start).Round(time.Millisecond))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := scenario.Stress(ctx, env, scenario.StressOptions{Dispatch: scenario.DispatchOptions{Jobs: n, NamePrefix: fmt.Sprintf("bench-%d", i)}})
		logStress(b, res)
		if admitted, onWorker, why := allAdmitted(env, res); why == "" {
			// What Kueue's own MultiKueue benchmark (kubernetes-sigs/kueue#13936)
			// rates: admissions, not runs to the end.
			b.Logf("  every Workload admitted %s after the first Job was created (%d of them only on their worker: the manager never recorded it): %.2f workloads/s; all Finished: %.2f workloads/s",
				admitted.Round(time.Millisecond), onWorker, float64(len(res.Objects))/admitted.Seconds(), float64(len(res.Objects))/res.Run.Seconds())
			b.ReportMetric(admitted.Seconds(), "admitted-s")
		} else {
			b.Logf("  the admission times could not be read from the history: %s", why)
		}
		if err != nil {
			// Failures are findings; report them without drowning the figures.
			fails := leaves(err)
			for _, e := range fails[:min(3, len(fails))] {
				b.Log(e)
			}
			b.Errorf("%d checks failed (the first 3 above; per assertion in the table)", len(fails))
		}
		b.ReportMetric(float64(len(res.Objects)), "workloads")
		b.ReportMetric(float64(res.Workers), "workers")
		b.ReportMetric(res.Run.Seconds(), "run-s")
		b.ReportMetric(res.Judging().Seconds(), "judging-s")
		for _, c := range res.Assertions {
			b.ReportMetric(float64(c.PerCall().Microseconds())/1000, c.Name+"-ms/call")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// allAdmitted is the time from the first of res's Jobs created on the
// manager until the last of their Workloads was first Admitted, from the
// Observer's history: on the manager, or, for a Workload whose admission the
// manager never recorded (Kueue v0.19.2 loses some placements under load,
// DispatchResult.Unrecorded), on the worker that admitted its copy; those
// are counted. why says what could not be read.
func allAdmitted(env *scenario.Env, res scenario.StressResult) (took time.Duration, onWorker int, why string) {
	mgr := env.Topo.Manager.Name
	var first, last time.Time
	for _, o := range res.Objects {
		jobs, _ := env.Obs.History(observe.KindJob, o.GetNamespace(), o.GetName())
		for _, e := range jobs {
			if e.Cluster == mgr && e.Type == observe.Created && (first.IsZero() || e.Time.Before(first)) {
				first = e.Time
			}
		}
		mwl, err := observe.WorkloadOf(context.Background(), env.Obs.Reader(env.Topo.Manager.Name), o.GetNamespace(), o.GetUID())
		if err != nil {
			return 0, 0, fmt.Sprintf("no manager Workload for %s/%s", o.GetNamespace(), o.GetName())
		}
		wl, _ := env.Obs.History(observe.KindWorkload, mwl.Namespace, mwl.Name)
		var onMgr, remote time.Time
		for _, e := range wl {
			switch {
			case e.Type != observe.Admitted:
			case e.Cluster == mgr && onMgr.IsZero():
				onMgr = e.Time
			case e.Cluster != mgr && remote.IsZero():
				remote = e.Time
			}
		}
		at := onMgr
		if at.IsZero() {
			at = remote
			onWorker++
		}
		if at.IsZero() {
			return 0, 0, fmt.Sprintf("Workload %s/%s was not seen Admitted on any cluster", mwl.Namespace, mwl.Name)
		}
		if at.After(last) {
			last = at
		}
	}
	if first.IsZero() {
		return 0, 0, "no Job creation on the manager was recorded"
	}
	return last.Sub(first), onWorker, ""
}

// BenchmarkThroughput is the shape of Kueue's own MultiKueue performance
// test (kubernetes-sigs/kueue#13936: 1 manager + 3 workers, client-go's
// default limits, 120 no-op workloads, ample quota; 1.31 workloads/s
// admitted there) on its own topology: $MKTK_THROUGHPUT_WORKLOADS (default
// 120) Jobs of 100m CPU running 1 ms, submitted at once, the manager's and
// each worker's quota fitting all of them; then every assertion over every
// workload. It reports the admission rate (the figure #13936 gives), the
// rate to Finished, and judging's share of the run. Not in the CI path:
//
//	go test ./scenario -run '^$' -bench Throughput -benchtime 1x -timeout 30m
func BenchmarkThroughput(b *testing.B) {
	n := envInt(b, "MKTK_THROUGHPUT_WORKLOADS", 120)
	ctx := context.Background()
	// 100m each: 120 need 12 CPU; every worker has 20, the manager their sum.
	_, env := testtopo.StartObserved(ctx, b, topology.Options{Workers: 3, WorkerQuota: topology.Quota{CPU: "20", Memory: "40Gi"}}, local.Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := scenario.Stress(ctx, env, scenario.StressOptions{Dispatch: scenario.DispatchOptions{Jobs: n, CPU: "100m", Memory: "10Mi", RunFor: time.Millisecond, NamePrefix: fmt.Sprintf("tput-%d", i)}, Ample: true})
		logStress(b, res)
		if admitted, onWorker, why := allAdmitted(env, res); why == "" {
			rate := float64(len(res.Objects)) / admitted.Seconds()
			b.Logf("  every Workload admitted %s after the first Job was created (%d only on their worker): %.2f workloads/s, %.2f× kubernetes-sigs/kueue#13936's 1.31; all Finished: %.2f workloads/s",
				admitted.Round(time.Millisecond), onWorker, rate, rate/1.31, float64(len(res.Objects))/res.Run.Seconds())
			b.ReportMetric(rate, "admitted/s")
		} else {
			b.Logf("  the admission times could not be read from the history: %s", why)
		}
		share := res.Judging().Seconds() / res.Run.Seconds()
		b.Logf("  judging every workload with every assertion took %s, %.2f %% of the run's %s", res.Judging().Round(time.Millisecond), 100*share, res.Run.Round(time.Millisecond))
		b.ReportMetric(100*share, "judging-%")
		b.ReportMetric(res.Run.Seconds(), "run-s")
		if err != nil {
			fails := leaves(err)
			for _, e := range fails[:min(3, len(fails))] {
				b.Log(e)
			}
			b.Errorf("%d checks failed (the first 3 above; per assertion in the table)", len(fails))
		}
	}
	b.ReportMetric(0, "ns/op")
}

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q is not a positive number", name, v)
	}
	return n
}
