package scenario_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// BenchmarkStartup measures, in one run, the time for 1 manager + 3 workers
// to become Active with the clusters started in parallel (the default), one
// after another, and in parallel with two KWOK Nodes, kube-scheduler and a
// KWOK controller on every worker (local.Options.Nodes), and reports the
// ratios. Binaries must be cached.
//
//	go test ./scenario -run '^$' -bench Startup -benchtime 1x
func BenchmarkStartup(b *testing.B) {
	ctx := context.Background()
	cases := []struct {
		name string
		opts local.Options
		took time.Duration
	}{
		{name: "parallel"},
		{name: "sequential", opts: local.Options{Sequential: true}},
		{name: "nodes", opts: local.Options{Nodes: &local.Nodes{Count: 2}}},
	}
	for i := 0; i < b.N; i++ {
		for j := range cases {
			start := time.Now()
			topo, err := local.New(ctx, topology.Options{Workers: 3}, cases[j].opts)
			if err != nil {
				b.Fatal(err)
			}
			cases[j].took += time.Since(start)
			if err := topo.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	n := float64(b.N)
	for _, c := range cases {
		b.ReportMetric(c.took.Seconds()/n, c.name+"-s")
	}
	b.ReportMetric(cases[1].took.Seconds()/cases[0].took.Seconds(), "seq/par")
	b.ReportMetric(cases[2].took.Seconds()/cases[0].took.Seconds(), "nodes/par")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkJobToFinished measures one Job from creation on the manager to its
// Workload being Finished on the manager, on 1 manager + 3 workers, with a
// run time on the worker of $MKTK_BENCH_RUN_FOR (default 1s); it reports the latency and its ratio to the run
// time (the MultiKueue overhead factor), and the time each step took, read
// from the Observer's history (jobSteps; one metric per step, the mean in
// milliseconds, and a log line per Job).
//
//	go test ./scenario -run '^$' -bench JobToFinished -benchtime 5x
//
// Kueue's MultiKueue copies a remote status change to the manager after its
// events batch period, a constant of 1 s in cmd/kueue (constants.
// UpdatesBatchPeriod, not in its Configuration), so a 1 s run time shows that
// second as half the overhead; MKTK_BENCH_RUN_FOR=10s reads the ratio at a
// run time where it weighs less.
func BenchmarkJobToFinished(b *testing.B) {
	ctx := context.Background()
	run := time.Second
	if v := os.Getenv("MKTK_BENCH_RUN_FOR"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("MKTK_BENCH_RUN_FOR=%q is not a positive duration", v)
		}
		run = d
	}
	topo, env := testtopo.StartObserved(ctx, b, topology.Options{Workers: 3}, local.Options{})
	var total time.Duration
	stepSums := map[string]time.Duration{}
	var stepNames []string
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
		steps := jobSteps(env, job, start)
		var line []string
		for _, st := range steps {
			if _, ok := stepSums[st.name]; !ok {
				stepNames = append(stepNames, st.name)
			}
			stepSums[st.name] += st.took
			line = append(line, fmt.Sprintf("%s %s", st.name, st.took.Round(time.Millisecond)))
		}
		b.Logf("%s: %s", job.Name, strings.Join(line, ", "))
	}
	per := total.Seconds() / float64(b.N)
	b.ReportMetric(per, "s/job")
	b.ReportMetric(per/run.Seconds(), "latency/runtime")
	for _, name := range stepNames {
		b.ReportMetric(float64(stepSums[name].Milliseconds())/float64(b.N), name+"-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// step is the time from the previous step's event to this one's.
type step struct {
	name string
	took time.Duration
}

// jobSteps breaks one finished Job's way down from its creation (start) to
// its manager Workload Finished, from the events the Observer recorded on
// every cluster: manager Workload created, quota reserved on the manager,
// the first remote copy created, the winner's copy admitted, the remote Job
// created, unsuspended, started and succeeded on the winner, the manager's
// Job succeeded (status synced) and the manager's Workload Finished. A step
// whose event is missing is left out and the next one counts from the last
// event found.
func jobSteps(env *scenario.Env, job *batchv1.Job, start time.Time) []step {
	mgr := env.Topo.Manager.Name
	mwl, err := observe.WorkloadOf(context.Background(), env.Obs.Reader(env.Topo.Manager.Name), job.GetNamespace(), job.GetUID())
	if err != nil {
		return nil
	}
	wl, _ := env.Obs.History(observe.KindWorkload, mwl.Namespace, mwl.Name)
	jobs, _ := env.Obs.History(observe.KindJob, job.Namespace, job.Name)
	winner := ""
	for _, e := range jobs {
		if e.Cluster != mgr && e.Type == observe.Created {
			winner = e.Cluster
		}
	}
	first := func(evs []observe.Event, match func(observe.Event) bool) time.Time {
		for _, e := range evs {
			if match(e) {
				return e.Time
			}
		}
		return time.Time{}
	}
	on := func(cluster string, t observe.Type) func(observe.Event) bool {
		return func(e observe.Event) bool { return e.Cluster == cluster && e.Type == t }
	}
	marks := []struct {
		name string
		at   time.Time
	}{
		{"workload-created", first(wl, on(mgr, observe.Created))},
		{"quota-reserved", first(wl, on(mgr, observe.QuotaReserved))},
		{"copies-created", first(wl, func(e observe.Event) bool { return e.Cluster != mgr && e.Type == observe.Created })},
		{"remote-admitted", first(wl, on(winner, observe.Admitted))},
		{"remote-job-created", first(jobs, on(winner, observe.Created))},
		{"remote-unsuspended", first(jobs, on(winner, observe.JobUnsuspended))},
		{"remote-started", first(jobs, on(winner, observe.JobStarted))},
		{"remote-succeeded", first(jobs, on(winner, observe.JobSucceeded))},
		{"manager-job-succeeded", first(jobs, on(mgr, observe.JobSucceeded))},
		{"manager-finished", first(wl, on(mgr, observe.Finished))},
	}
	var out []step
	prev := start
	for _, m := range marks {
		if m.at.IsZero() {
			continue
		}
		out = append(out, step{name: m.name, took: m.at.Sub(prev)})
		prev = m.at
	}
	return out
}

// BenchmarkObserverOverhead runs the same batch of Jobs end to end on one
// topology (1 manager + 3 workers) with an Observer recording every cluster
// and without one, alternating within each iteration, and reports the ratio
// of the batch times: the cost of recording history. Without the Observer,
// completion is detected by listing the manager's Workloads every 250ms.
//
// The ratio is noisy with few iterations on 2 cores; use 6 or more:
//
//	go test ./scenario -run '^$' -bench ObserverOverhead -benchtime 6x
func BenchmarkObserverOverhead(b *testing.B) {
	ctx := context.Background()
	topo, err := local.New(ctx, topology.Options{Workers: 3}, local.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer topo.Close(ctx)
	const batch = 10
	var on, off time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, observed := range []bool{false, true} {
			prefix := fmt.Sprintf("ovh-%d-%t", i, observed)
			var env *scenario.Env
			if observed {
				if env, err = scenario.Observe(ctx, topo); err != nil {
					b.Fatal(err)
				}
			}
			start := time.Now()
			jobs := make([]*batchv1.Job, batch)
			for k := range jobs {
				jobs[k] = workload.NewJob(fmt.Sprintf("%s-%d", prefix, k), "default").Queue("user-queue").Requests("1", "1Gi").RunFor(time.Second).Obj()
				if err := topo.Manager.Client.Create(ctx, jobs[k]); err != nil {
					b.Fatal(err)
				}
			}
			if observed {
				for _, j := range jobs {
					if err := env.Check.Finished(ctx, j); err != nil {
						b.Fatal(err)
					}
				}
				on += time.Since(start)
				env.Close()
			} else {
				if err := waitFinishedByListing(ctx, topo, batch, prefix); err != nil {
					b.Fatal(err)
				}
				off += time.Since(start)
			}
		}
	}
	b.ReportMetric(off.Seconds()/float64(b.N), "off-s/batch")
	b.ReportMetric(on.Seconds()/float64(b.N), "on-s/batch")
	b.ReportMetric(on.Seconds()/off.Seconds(), "on/off")
	b.ReportMetric(0, "ns/op")
}

// waitFinishedByListing waits until n manager Workloads of Jobs named
// prefix-* are Finished, by listing them.
func waitFinishedByListing(ctx context.Context, topo *topology.Topology, n int, prefix string) error {
	return poll.UntilEvery(ctx, 5*time.Minute, 250*time.Millisecond, fmt.Sprintf("%d Workloads of %s-* to finish", n, prefix), func(ctx context.Context) error {
		var wls kueue.WorkloadList
		if err := topo.Manager.Client.List(ctx, &wls, client.InNamespace("default")); err != nil {
			return err
		}
		done := 0
		for _, wl := range wls.Items {
			if len(wl.OwnerReferences) > 0 && strings.HasPrefix(wl.OwnerReferences[0].Name, prefix+"-") &&
				apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
				done++
			}
		}
		if done < n {
			return fmt.Errorf("%d of %d finished", done, n)
		}
		return nil
	})
}

// BenchmarkAuditOverhead measures, in one run, what the local API servers'
// audit logs (attribution: who made each change) cost: the start-up of
// 1 manager + 3 workers until Active, and the 20-Job dispatch
// (scenario.Dispatch, batch/Jobs) on it, with audit on and off (local.Options
// DisableAudit), the order alternating between iterations. It reports each
// time and the on/off ratios.
//
//	go test ./scenario -run '^$' -bench AuditOverhead -benchtime 3x
func BenchmarkAuditOverhead(b *testing.B) {
	ctx := context.Background()
	var startOn, startOff, dispOn, dispOff time.Duration
	for i := 0; i < b.N; i++ {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, audit := range order {
			start := time.Now()
			topo, err := local.New(ctx, topology.Options{Workers: 3}, local.Options{DisableAudit: !audit})
			if err != nil {
				b.Fatal(err)
			}
			started := time.Since(start)
			env, err := scenario.Observe(ctx, topo)
			if err != nil {
				b.Fatal(err)
			}
			start = time.Now()
			_, err = scenario.Dispatch(ctx, env, scenario.DispatchOptions{Jobs: 20, Kinds: []observe.Kind{observe.KindJob}, NamePrefix: fmt.Sprintf("audit-%t", audit)})
			dispatched := time.Since(start)
			env.Close()
			if cerr := topo.Close(ctx); err == nil {
				err = cerr
			}
			if err != nil {
				b.Fatal(err)
			}
			if audit {
				startOn, dispOn = startOn+started, dispOn+dispatched
			} else {
				startOff, dispOff = startOff+started, dispOff+dispatched
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(startOff.Seconds()/n, "start-off-s")
	b.ReportMetric(startOn.Seconds()/n, "start-on-s")
	b.ReportMetric(startOn.Seconds()/startOff.Seconds(), "start-on/off")
	b.ReportMetric(dispOff.Seconds()/n, "dispatch-off-s")
	b.ReportMetric(dispOn.Seconds()/n, "dispatch-on-s")
	b.ReportMetric(dispOn.Seconds()/dispOff.Seconds(), "dispatch-on/off")
	b.ReportMetric(0, "ns/op")
}
