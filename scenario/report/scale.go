package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/redact"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

// StartFunc starts a topology of 1 manager and workers workers and returns
// it once its MultiKueue setup is Active (local.New, for instance).
type StartFunc func(ctx context.Context, workers int) (*topology.Topology, error)

// ScaleOptions shape Scale.
type ScaleOptions struct {
	// Workers lists the worker counts, one run each, in order; required,
	// each 1–20, no repeats.
	Workers []int
	// Jobs each run's load submits at once; default 200.
	Jobs int
	// RunFor is each job's run time on its worker; default 1s.
	RunFor time.Duration
	// Out is the directory for the JSONL, the plots, report.html and, on
	// failure, the log tails; required.
	Out string
	// Start starts each run's topology; required.
	Start StartFunc
	// Timeout bounds each assertion's wait; default assert.DefaultTimeout
	// plus RunFor per job (the load queues on the workers' quotas).
	Timeout time.Duration
	// LogLines kept of each log on failure; default DefaultLogLines.
	LogLines int
	// Progress receives phase lines and a progress bar with an estimate of
	// the time left; nil discards.
	Progress io.Writer
}

// ScaleResult is what Scale measured and wrote.
type ScaleResult struct {
	Runs []RunReport
	// Files written: the JSONL files, plots and report.html.
	Files []string
}

func (o *ScaleOptions) defaults() error {
	if len(o.Workers) == 0 {
		return errors.New("report: ScaleOptions.Workers: empty; give at least one worker count")
	}
	for i, n := range o.Workers {
		if n < 1 || n > 20 {
			return fmt.Errorf("report: ScaleOptions.Workers[%d]: %d is not in 1–20", i, n)
		}
		if slices.Contains(o.Workers[:i], n) {
			return fmt.Errorf("report: ScaleOptions.Workers[%d]: %d is repeated", i, n)
		}
	}
	if o.Jobs == 0 {
		o.Jobs = 200
	}
	if o.Jobs < 0 {
		return fmt.Errorf("report: ScaleOptions.Jobs: %d is negative", o.Jobs)
	}
	if o.RunFor == 0 {
		o.RunFor = time.Second
	}
	if o.RunFor < 0 {
		return fmt.Errorf("report: ScaleOptions.RunFor: %s is negative", o.RunFor)
	}
	if o.Out == "" {
		return errors.New("report: ScaleOptions.Out: empty; name the output directory")
	}
	if o.Start == nil {
		return errors.New("report: ScaleOptions.Start: nil; pass a function that starts a topology (local.New)")
	}
	if o.Timeout == 0 {
		o.Timeout = assert.DefaultTimeout + time.Duration(o.Jobs)*o.RunFor
	}
	return nil
}

// Scale runs, for each worker count N in Workers: a topology of 1 manager
// + N workers (Start), a smoke gate (SetupActive, then one Job
// ExactlyOnceAdmitted) and, if it passes, the load: Jobs Jobs submitted at
// once, each judged (ExactlyOnceAdmitted, NominationCleared,
// LosersCleaned, Finished, StatusSynced), then QuotaRespected and
// NoOrphans. It records each run (Collect) and appends it to
// Out/report.jsonl and Out/clusters/*.jsonl as soon as it ends, copies the
// clusters' log tails to Out/artifacts/<run>/ when the run failed, and at
// the end writes the plots and Out/report.html.
//
// A failed run does not stop the next one. The error joins the failed
// runs' errors: each is a *scenario.InfraError (the topology did not start,
// an API server could not be reached) or a *scenario.BehaviourError (an
// assertion; *assert.Failure within), or another error when neither can
// be told; errors.As tells them apart.
func Scale(ctx context.Context, o ScaleOptions) (ScaleResult, error) {
	if err := o.defaults(); err != nil {
		return ScaleResult{}, err
	}
	total := 0
	for _, n := range o.Workers {
		total += n + 1 + 1 + o.Jobs
	}
	pr := newProgress(o.Progress, total)
	var res ScaleResult
	var errs []error
	for _, n := range o.Workers {
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("scale: stopped before the %d-worker run: %w", n, ctx.Err()))
			break
		}
		rr, err := runOne(ctx, o, n, pr)
		res.Runs = append(res.Runs, rr)
		if werr := Append(o.Out, rr); werr != nil {
			errs = append(errs, fmt.Errorf("scale: write %s: %w", o.Out, werr))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", rr.Run.Run, err))
		}
	}
	res.Files = append(res.Files, filepath.Join(o.Out, AggregateFile))
	plots, err := WritePlots(o.Out, res.Runs)
	errs = append(errs, err)
	res.Files = append(res.Files, plots...)
	html, err := WriteHTML(o.Out, res.Runs, plots)
	errs = append(errs, err)
	if html != "" {
		res.Files = append(res.Files, html)
	}
	return res, errors.Join(errs...)
}

// RunID names the run of n workers.
func RunID(n int) string { return fmt.Sprintf("w%02d", n) }

// runState is one run in progress.
type runState struct {
	o    ScaleOptions
	pr   *progress
	rep  *RunReport
	topo *topology.Topology
	env  *scenario.Env
	chk  *assert.Checker

	mu   sync.Mutex
	jobs []Job
}

func runOne(ctx context.Context, o ScaleOptions, n int, pr *progress) (RunReport, error) {
	id := RunID(n)
	rep := RunReport{Run: Run{Header: header(RecordRun, id, ""), Workers: n, Jobs: o.Jobs, Started: time.Now(), Phase: PhaseStart}}
	units := n + 2 + o.Jobs
	done := 0
	count := func(k int) { done += k; pr.add(k) }
	defer func() { pr.add(units - done) }()

	peak := sampleMemory(ctx)
	pr.phase("run %s: starting 1 manager + %d worker(s)", id, n)
	topo, err := o.Start(ctx, n)
	if err != nil {
		err = &scenario.InfraError{Op: fmt.Sprintf("start 1 manager + %d worker(s)", n), Err: err}
		return finish(&rep, o, nil, peak, err), err
	}
	rep.Run.Provider = topo.ProviderName
	rep.Run.StartupSeconds = round3(time.Since(rep.Run.Started).Seconds())
	rep.Run.MemoryAfterStartBytes = TreeMemory()
	var mem map[string]int64
	if cd, ok := topo.Provider().(topology.ClusterDirs); ok {
		mem = MemoryByCluster(cd.Dir(), clusterNames(topo))
	}
	count(n + 1)
	pr.phase("run %s: Active in %.1fs, %s in use", id, rep.Run.StartupSeconds, mib(rep.Run.MemoryAfterStartBytes))
	defer func() {
		if cerr := topo.Close(context.WithoutCancel(ctx)); cerr != nil {
			pr.phase("run %s: teardown: %v", id, cerr)
		}
	}()
	var counter Counter
	env, err := scenario.ObserveWith(ctx, topo, observe.Options{WrapTransport: counter.Wrap})
	if err != nil {
		err = &scenario.InfraError{Op: "start the Observer", Err: err}
		return finish(&rep, o, topo, peak, err), err
	}
	defer env.Close()
	chk := *env.Check
	chk.Timeout, chk.Since = o.Timeout, rep.Run.Started
	r := &runState{o: o, pr: pr, rep: &rep, topo: topo, env: env, chk: &chk}

	rep.Run.Phase = PhaseSmoke
	err = r.smoke(ctx)
	count(1)
	if err == nil {
		rep.Run.Phase = PhaseLoad
		pr.phase("run %s: smoke gate passed; load: %d Jobs", id, o.Jobs)
		loadStart := time.Now()
		err = r.load(ctx, func() { count(1) })
		rep.Run.LoadSeconds = round3(time.Since(loadStart).Seconds())
	}
	rep.Clusters, rep.Workloads, rep.Transitions = Collect(ctx, CollectInput{
		Run: id, Topo: topo, Obs: env.Obs, Start: rep.Run.Started, Jobs: r.jobs, Requests: &counter, Memory: mem,
	})
	r.placeVerdicts()
	if err == nil {
		rep.Run.Phase = PhaseDone
	} else {
		err = classified(rep.Run.Phase, err)
	}
	return finish(&rep, o, topo, peak, err), err
}

// finish completes the run record: verdict, class, memory peak and, on
// failure, the clusters' log tails, copied to Out/artifacts/<run> (topo,
// when it started, is still up).
func finish(rep *RunReport, o ScaleOptions, topo *topology.Topology, peak func() int64, err error) RunReport {
	rep.Run.DurationSeconds = round3(time.Since(rep.Run.Started).Seconds())
	rep.Run.MemoryPeakBytes = max(peak(), rep.Run.MemoryAfterStartBytes)
	rep.Run.Passed = err == nil
	if err == nil {
		return *rep
	}
	rep.Run.FailureClass = string(scenario.Classify(err))
	msg := err.Error()
	if topo != nil {
		dir := filepath.Join(o.Out, ArtifactsDir, rep.Run.Run)
		files, cerr := CopyLogs(topo, dir, o.LogLines)
		if len(files) > 0 {
			rep.Run.Artifacts = dir
		}
		if cerr != nil {
			msg += "\n(log tails: " + cerr.Error() + ")"
		}
	}
	rep.Run.Error = firstLines(msg, 20)
	return *rep
}

// ArtifactsDir, under Out, holds each failed run's log tails.
const ArtifactsDir = "artifacts"

// classified wraps err in the error type of its class.
func classified(phase string, err error) error {
	var ie *scenario.InfraError
	var be *scenario.BehaviourError
	if errors.As(err, &ie) || errors.As(err, &be) {
		return err
	}
	switch scenario.Classify(err) {
	case scenario.ClassInfrastructure:
		return &scenario.InfraError{Op: phase, Err: err}
	case scenario.ClassBehaviour:
		return &scenario.BehaviourError{Scenario: phase, Err: err}
	}
	return err
}

// sampleMemory samples TreeMemory every 2 s until the returned function is
// called, which returns the peak.
func sampleMemory(ctx context.Context) func() int64 {
	ctx, cancel := context.WithCancel(ctx)
	var peak int64
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			peak = max(peak, TreeMemory())
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		cancel()
		wg.Wait()
		return peak
	}
}

// smoke is the gate: SetupActive, then one Job ExactlyOnceAdmitted.
func (r *runState) smoke(ctx context.Context) error {
	if err := r.verdict(ctx, PhaseSmoke, "SetupActive", nil, r.chk.SetupActive); err != nil {
		return err
	}
	job := r.newJob("scale-smoke")
	if err := r.create(ctx, PhaseSmoke, job); err != nil {
		return err
	}
	return r.verdict(ctx, PhaseSmoke, "ExactlyOnceAdmitted", job, func(ctx context.Context) error { return r.chk.ExactlyOnceAdmitted(ctx, job) })
}

// load submits the Jobs at once and judges each, then the topology.
func (r *runState) load(ctx context.Context, jobDone func()) error {
	jobs := make([]client.Object, r.o.Jobs)
	for i := range jobs {
		jobs[i] = r.newJob(fmt.Sprintf("scale-load-%d", i))
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = r.create(ctx, PhaseLoad, j)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	judged := make([]error, len(jobs))
	sem = make(chan struct{}, 64)
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			defer jobDone()
			var es []error
			for _, c := range []struct {
				name string
				fn   func(context.Context, client.Object) error
			}{
				{"ExactlyOnceAdmitted", r.chk.ExactlyOnceAdmitted},
				{"NominationCleared", r.chk.NominationCleared},
				{"LosersCleaned", r.chk.LosersCleaned},
				{"Finished", r.chk.Finished},
				{"StatusSynced", r.chk.StatusSynced},
			} {
				es = append(es, r.verdict(ctx, PhaseLoad, c.name, j, func(ctx context.Context) error { return c.fn(ctx, j) }))
			}
			judged[i] = errors.Join(es...)
		})
	}
	wg.Wait()
	return errors.Join(append(judged,
		r.verdict(ctx, PhaseLoad, "QuotaRespected", nil, r.chk.QuotaRespected),
		r.verdict(ctx, PhaseLoad, "NoOrphans", nil, r.chk.NoOrphans))...)
}

func (r *runState) newJob(name string) client.Object {
	return workload.NewJob(name, r.topo.Spec.Queues.Namespaces[0]).Queue(r.topo.Spec.Queues.LocalQueue).
		Requests("1", "1Gi").RunFor(r.o.RunFor).Obj()
}

// create submits job to the manager and records it; a failure to reach
// the API server is an InfraError.
func (r *runState) create(ctx context.Context, phase string, job client.Object) error {
	mgr := r.topo.Manager
	if err := mgr.Client.Create(ctx, job); err != nil {
		if scenario.Classify(err) == scenario.ClassInfrastructure {
			return &scenario.InfraError{Cluster: mgr.Name, Op: "create " + objRef(job), Err: err}
		}
		return fmt.Errorf("cluster %q: create %s: %w", mgr.Name, objRef(job), err)
	}
	r.mu.Lock()
	r.jobs = append(r.jobs, Job{Phase: phase, Obj: job})
	r.mu.Unlock()
	return nil
}

// verdict runs one assertion and records its verdict.
func (r *runState) verdict(ctx context.Context, phase, name string, obj client.Object, fn func(context.Context) error) error {
	start := time.Now()
	err := fn(ctx)
	a := Assertion{Header: header(RecordAssertion, r.rep.Run.Run, r.topo.Manager.Name), Phase: phase, Assertion: name,
		Passed: err == nil, DurationMS: ms(time.Since(start))}
	if obj != nil {
		a.Object = objRef(obj)
	}
	if err != nil {
		a.Class = string(scenario.Classify(err))
		a.Message = firstLines(err.Error(), 12)
		if c := r.namedCluster(a.Message); c != "" {
			a.Cluster = c
		}
	}
	r.mu.Lock()
	r.rep.Assertions = append(r.rep.Assertions, a)
	r.mu.Unlock()
	return err
}

// namedCluster is the first cluster of the topology a message names
// (`cluster "worker-2"`).
func (r *runState) namedCluster(msg string) string {
	for _, m := range regexp.MustCompile(`cluster "([^"]+)"`).FindAllStringSubmatch(msg, -1) {
		if r.topo.Cluster(m[1]) != nil {
			return m[1]
		}
	}
	return ""
}

// placeVerdicts keys each passed per-object verdict by the worker its
// workload was placed on.
func (r *runState) placeVerdicts() {
	placed := map[string]string{}
	for _, w := range r.rep.Workloads {
		placed[w.Kind+" "+w.Namespace+"/"+w.Name] = w.Cluster
	}
	for i, a := range r.rep.Assertions {
		if c, ok := placed[a.Object]; ok && a.Passed {
			r.rep.Assertions[i].Cluster = c
		}
	}
}

// objRef names a job object: "Job default/a".
func objRef(o client.Object) string {
	k, ok := observe.JobKindOf(o)
	if !ok {
		k = observe.Kind(fmt.Sprintf("%T", o))
	}
	return fmt.Sprintf("%s %s/%s", k, o.GetNamespace(), o.GetName())
}

func clusterNames(t *topology.Topology) []string {
	var out []string
	for _, c := range t.Clusters() {
		out = append(out, c.Name)
	}
	return out
}

// firstLines is s redacted, cut to n lines.
func firstLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(redact.String(s), "\n"), "\n")
	if len(ls) > n {
		ls = append(ls[:n], fmt.Sprintf("… (%d more lines)", len(ls)-n))
	}
	return strings.Join(ls, "\n")
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
