package report_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/scenario/report"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

func startLocal(lopts local.Options) report.StartFunc {
	return func(ctx context.Context, n int) (*topology.Topology, error) {
		return local.New(ctx, topology.Options{Workers: n}, lopts)
	}
}

// TestScale runs 1 manager + 2 workers with a small load on real clusters
// and checks what Scale wrote: every line of every JSONL file valid
// against schema.json, the figures consistent with the load, the plots and
// a self-contained report.html.
func TestScale(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	const jobs = 8
	var progress strings.Builder
	start := time.Now()
	res, err := report.Scale(ctx, report.ScaleOptions{Workers: []int{2}, Jobs: jobs, Out: out, Start: startLocal(local.Options{}), Progress: &progress})
	t.Logf("Scale took %s; progress:\n%s", time.Since(start).Round(time.Millisecond), progress.String())
	if err != nil {
		t.Fatal(err)
	}
	v, err := report.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{}
	for _, f := range append([]string{filepath.Join(out, report.AggregateFile)}, glob(t, filepath.Join(out, report.ClustersDir, "*.jsonl"))...) {
		n, err := v.File(f)
		if err != nil {
			t.Errorf("schema: %v", err)
		}
		lines[filepath.Base(f)] = n
	}
	t.Logf("lines per file: %v", lines)
	if len(lines) != 4 { // aggregate + manager + 2 workers
		t.Errorf("files %v, want report.jsonl and one per cluster (3)", lines)
	}
	rr := res.Runs[0]
	if !rr.Run.Passed || rr.Run.Phase != report.PhaseDone || rr.Run.StartupSeconds <= 0 {
		t.Errorf("run = %+v, want passed, done, a start-up time", rr.Run)
	}
	placed, requests := 0, int64(0)
	for _, c := range rr.Clusters {
		placed += c.Placements
		requests += c.APIRequests
		if c.Role == "worker" {
			if c.ActiveSeconds == nil || c.ActiveTransitions == 0 || c.MemoryBytes == 0 {
				t.Errorf("worker %s: active at %v, %d transitions, %d bytes; want all set", c.Cluster, c.ActiveSeconds, c.ActiveTransitions, c.MemoryBytes)
			}
			if c.Placements > 0 && (c.DispatchLatencyMS.Count != c.Placements || c.DispatchLatencyMS.P50 <= 0) {
				t.Errorf("worker %s: %d placements, dispatch %+v", c.Cluster, c.Placements, c.DispatchLatencyMS)
			}
		}
	}
	if placed != jobs || requests == 0 {
		t.Errorf("placements sum %d, requests %d; want %d and some", placed, requests, jobs)
	}
	if want := 2 + 5*jobs + 2; len(rr.Assertions) != want {
		t.Errorf("%d assertion verdicts, want %d", len(rr.Assertions), want)
	}
	for _, w := range rr.Workloads {
		if w.DispatchLatencyMS == nil || w.RemoteAdmissionMS == nil || (w.Phase == report.PhaseLoad && (w.StatusSyncLagMS == nil || w.Outcome != "Succeeded")) {
			t.Errorf("workload %s (%s): dispatch %v admission %v sync %v outcome %q; manager Workload %q, %d losers (no manager Workload: the Observer's cache had none for the job; every copy a loser: its history on the manager has no clusterName set)",
				w.Name, w.Phase, w.DispatchLatencyMS, w.RemoteAdmissionMS, w.StatusSyncLagMS, w.Outcome, w.Workload, w.Losers)
		}
	}
	for _, name := range []string{report.StartupPlot, report.MemoryPlot, report.LatencyPlot("w02"), report.PlacementPlot("w02")} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
			t.Errorf("plot %s: %d bytes, %v", name, len(b), err)
		}
	}
	html, err := os.ReadFile(filepath.Join(out, report.HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), `src="data:image/png;base64,`); n != 4 {
		t.Errorf("report.html inlines %d images, want 4", n)
	}
	if strings.Contains(string(html), `src="http`) || strings.Contains(string(html), `src="/`) {
		t.Error("report.html refers to an outside file")
	}
	if os.Getenv(assert.EnvArtifacts) != "" {
		copyDir(t, out, filepath.Join(os.Getenv(assert.EnvArtifacts), "report-TestScale"))
	}
}

// TestScaleFailureClasses builds each class of failure for real: a
// topology that cannot start in its budget (infrastructure), a manager
// whose Kueue (and so its webhooks) is stopped, so the smoke Job cannot
// even be created (infrastructure: the API server cannot call the webhook)
// and a worker whose Kueue is stopped, so the smoke Job is never admitted
// there (behaviour: ExactlyOnceAdmitted fails). Each is told apart with
// errors.As, recorded with its class, and a run that failed after start
// leaves the clusters' log tails, redacted.
func TestScaleFailureClasses(t *testing.T) {
	ctx := context.Background()
	t.Run("infrastructure", func(t *testing.T) {
		out := t.TempDir()
		res, err := report.Scale(ctx, report.ScaleOptions{Workers: []int{1}, Jobs: 1, Out: out,
			Start: startLocal(local.Options{StartTimeout: time.Millisecond})})
		var ie *scenario.InfraError
		var be *scenario.BehaviourError
		if !errors.As(err, &ie) || errors.As(err, &be) || scenario.Classify(err) != scenario.ClassInfrastructure {
			t.Fatalf("error %v: want an InfraError only", err)
		}
		run := res.Runs[0].Run
		if run.Passed || run.Phase != report.PhaseStart || run.FailureClass != "infrastructure" {
			t.Errorf("run = %+v, want failed in start on infrastructure", run)
		}
		validate(t, filepath.Join(out, report.AggregateFile))
	})
	// stopKueue starts a topology and stops one cluster's Kueue.
	stopKueue := func(cluster func(*topology.Topology) *topology.Cluster) report.StartFunc {
		return func(ctx context.Context, n int) (*topology.Topology, error) {
			topo, err := local.New(ctx, topology.Options{Workers: n}, local.Options{})
			if err != nil {
				return nil, err
			}
			if err := cluster(topo).Lifecycle.StopKueue(ctx); err != nil {
				return nil, errors.Join(err, topo.Close(ctx))
			}
			return topo, nil
		}
	}
	t.Run("infrastructure after start", func(t *testing.T) {
		out := t.TempDir()
		res, err := report.Scale(ctx, report.ScaleOptions{Workers: []int{1}, Jobs: 1, Out: out, Timeout: 15 * time.Second,
			Start: stopKueue(func(t *topology.Topology) *topology.Cluster { return t.Manager })})
		var ie *scenario.InfraError
		if !errors.As(err, &ie) || ie.Cluster != "manager" || scenario.Classify(err) != scenario.ClassInfrastructure {
			t.Fatalf("error %v: want an InfraError naming the manager", err)
		}
		if strings.Count(err.Error(), "create Job") != 1 {
			t.Errorf("error repeats itself: %v", err)
		}
		rr := res.Runs[0]
		if rr.Run.Phase != report.PhaseSmoke || rr.Run.FailureClass != "infrastructure" || rr.Run.Artifacts == "" {
			t.Errorf("run = %+v, want failed in smoke on infrastructure, with artifacts", rr.Run)
		}
		validate(t, filepath.Join(out, report.AggregateFile))
	})
	t.Run("behaviour", func(t *testing.T) {
		out := t.TempDir()
		res, err := report.Scale(ctx, report.ScaleOptions{Workers: []int{1}, Jobs: 1, Out: out, Timeout: 15 * time.Second,
			Start: stopKueue(func(t *topology.Topology) *topology.Cluster { return t.Workers[0] })})
		var ie *scenario.InfraError
		var be *scenario.BehaviourError
		var f *assert.Failure
		if !errors.As(err, &be) || !errors.As(err, &f) || errors.As(err, &ie) || scenario.Classify(err) != scenario.ClassBehaviour {
			t.Fatalf("error %v: want a BehaviourError with an *assert.Failure, no InfraError", err)
		}
		if f.Assertion != "ExactlyOnceAdmitted" {
			t.Errorf("failed assertion %q, want ExactlyOnceAdmitted", f.Assertion)
		}
		rr := res.Runs[0]
		if rr.Run.Passed || rr.Run.Phase != report.PhaseSmoke || rr.Run.FailureClass != "behaviour" || rr.Run.Artifacts == "" {
			t.Errorf("run = %+v, want failed in smoke on behaviour, with artifacts", rr.Run)
		}
		var failed []report.Assertion
		for _, a := range rr.Assertions {
			if !a.Passed {
				failed = append(failed, a)
			}
		}
		if len(failed) != 1 || failed[0].Class != "behaviour" || failed[0].Message == "" {
			t.Errorf("failed verdicts %+v, want one ExactlyOnceAdmitted, behaviour, with its message", failed)
		}
		for _, c := range []string{"manager", "worker-1"} {
			for _, name := range report.LogFileNames() {
				b, err := os.ReadFile(filepath.Join(rr.Run.Artifacts, c, name))
				if err != nil || len(b) == 0 {
					t.Errorf("log tail %s/%s: %d bytes, %v", c, name, len(b), err)
				}
				if strings.Contains(string(b), "BEGIN ") || strings.Contains(string(b), "eyJ") {
					t.Errorf("log tail %s/%s holds credentials", c, name)
				}
			}
		}
		validate(t, filepath.Join(out, report.AggregateFile))
	})
}

func validate(t *testing.T, path string) {
	t.Helper()
	v, err := report.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.File(path); err != nil {
		t.Errorf("schema: %v", err)
	}
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err == nil && m["record"] == "run" {
			t.Logf("run record: %s", l)
		}
	}
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Error(err)
	}
}
