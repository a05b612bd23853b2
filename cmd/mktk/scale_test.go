package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/scenario/report"
)

// TestScale runs `mktk scale --workers 2,5 --jobs 50` as a user would
// (3 m 31 s here with other tests loading the machine) and checks its
// output directory: every JSONL line valid against schema.json, one file per
// cluster, the plots, report.html with them inlined, the progress bar.
// A run that failed on a MultiKueue behaviour (not on infrastructure) is
// logged, not failed: the command is under test here; scenario/report's
// TestScale requires a clean run. With -short it runs --workers 1,2
// --jobs 10.
func TestScale(t *testing.T) {
	bin := theBinary.get(t)
	workers, jobs, clusters := "2,5", "50", []string{"manager", "worker-1", "worker-2", "worker-3", "worker-4", "worker-5"}
	if testing.Short() {
		workers, jobs, clusters = "1,2", "10", []string{"manager", "worker-1", "worker-2"}
	}
	out := t.TempDir()
	if a := os.Getenv(assert.EnvArtifacts); a != "" {
		out = filepath.Join(a, "mktk-TestScale") // kept for a look at report.html
	}
	cmd := exec.Command(bin, "scale", "--workers", workers, "--jobs", jobs, "--out", out)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	stdout, err := cmd.Output()
	t.Logf("mktk scale --workers %s --jobs %s took %s; stderr:\n%s", workers, jobs, time.Since(start).Round(time.Millisecond), stderr.String())
	// The subject is the command: a run that failed on a MultiKueue
	// behaviour still has to write everything, and says so. Seen once in
	// four runs here: a manager Job whose Workload finished without its
	// status ever copied from the remote one (StatusSynced).
	if err != nil {
		failed := failedVerdicts(filepath.Join(out, report.AggregateFile))
		if !strings.Contains(stderr.String(), "a MultiKueue behaviour failed") {
			t.Fatalf("mktk scale: %v; failed verdicts:\n%s", err, failed)
		}
		t.Logf("mktk scale exited with %v: a MultiKueue behaviour failed; the output is checked all the same:\n%s", err, failed)
	}
	if got := strings.TrimSpace(string(stdout)); got != out {
		t.Errorf("stdout %q, want the output directory %q", got, out)
	}
	v, err := report.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(out, report.AggregateFile)}
	for _, c := range clusters {
		files = append(files, filepath.Join(out, report.ClustersDir, c+".jsonl"))
	}
	for _, f := range files {
		n, err := v.File(f)
		if err != nil {
			t.Errorf("schema: %v", err)
		}
		if n == 0 {
			t.Errorf("%s: empty", f)
		}
	}
	plots := []string{report.StartupPlot, report.MemoryPlot}
	for _, w := range strings.Split(workers, ",") {
		run := "w0" + w
		plots = append(plots, report.LatencyPlot(run), report.PlacementPlot(run))
	}
	for _, p := range plots {
		if st, err := os.Stat(filepath.Join(out, p)); err != nil || st.Size() < 1000 {
			t.Errorf("plot %s: %v", p, err)
		}
	}
	html, err := os.ReadFile(filepath.Join(out, report.HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), "data:image/png;base64,"); n != len(plots) {
		t.Errorf("report.html inlines %d images, want %d", n, len(plots))
	}
	if !strings.Contains(stderr.String(), "ETA") {
		t.Error("no progress bar with an ETA on stderr")
	}
}

// failedVerdicts lists the failed assertion records of a report, one line
// each (the first line of the message).
func failedVerdicts(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		var a report.Assertion
		if json.Unmarshal([]byte(l), &a) != nil || a.Record != report.RecordAssertion || a.Passed {
			continue
		}
		first, _, _ := strings.Cut(a.Message, "\n")
		out = append(out, fmt.Sprintf("  %s %s %s %s (cluster %s, %s): %s", a.Run, a.Phase, a.Assertion, a.Object, a.Cluster, a.Class, first))
	}
	return strings.Join(out, "\n")
}
