package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/scenario/report"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// scale is `mktk scale`: report.Scale on the local topology.
func scale(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mktk scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workers := fs.String("workers", "2,5,10,19", "worker counts, comma-separated, one run each (1–20)")
	jobs := fs.Int("jobs", 200, "Jobs each run's load submits at once")
	out := fs.String("out", "", "output directory (default $"+assert.EnvArtifacts+", else a new temp dir, printed)")
	runFor := fs.Duration("run-for", time.Second, "each Job's run time on its worker")
	timeout := fs.Duration("timeout", 0, "bound on each assertion's wait while nothing progresses in the topology (default 2m plus run-for per job)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mktk scale [--workers 2,5,10,19] [--jobs 200] [--out DIR]

For each worker count N: start 1 manager + N workers, a smoke gate
(SetupActive, one Job ExactlyOnceAdmitted), then the load (the Jobs at once,
each judged; QuotaRespected, NoOrphans). Writes DIR/report.jsonl,
DIR/clusters/<cluster>.jsonl (schema multikueue-testkit/report/v1), the plots
and DIR/report.html; a failed run's log tails under DIR/artifacts/<run>.
Exit status 1 when a run failed, naming what it failed on. Kueue runs with
the configuration its chart sets, controller concurrency included.

flags:
`)
		fs.PrintDefaults()
	}
	if !parseNoArgs(fs, args, stderr) {
		return 2
	}
	ns, err := parseWorkers(*workers)
	if err != nil {
		fmt.Fprintln(stderr, "mktk scale:", err)
		return 2
	}
	dir := *out
	if dir == "" {
		dir = os.Getenv(assert.EnvArtifacts)
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mktk-scale-"); err != nil {
			fmt.Fprintln(stderr, "mktk scale:", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "mktk: writing to %s\n", dir)
	ctx, stop := signalContext()
	defer stop()
	res, err := report.Scale(ctx, report.ScaleOptions{
		Workers: ns, Jobs: *jobs, RunFor: *runFor, Timeout: *timeout, Out: dir, Progress: stderr,
		Start: func(ctx context.Context, n int) (*topology.Topology, error) {
			return local.New(ctx, topology.Options{Workers: n}, local.Options{})
		},
	})
	for _, rr := range res.Runs {
		r := rr.Run
		verdict := "passed"
		if !r.Passed {
			verdict = fmt.Sprintf("FAILED on %s (in %s)", r.FailureClass, r.Phase)
		}
		fmt.Fprintf(stderr, "mktk: run %s: 1+%d Active in %.1fs, %d MiB after start (peak %d MiB), load %.1fs: %s\n",
			r.Run, r.Workers, r.StartupSeconds, r.MemoryAfterStartBytes>>20, r.MemoryPeakBytes>>20, r.LoadSeconds, verdict)
	}
	fmt.Fprintf(stderr, "mktk: report: %s\n", filepath.Join(dir, report.HTMLFile))
	fmt.Fprintln(stdout, dir)
	if err != nil {
		var ie *scenario.InfraError
		var be *scenario.BehaviourError
		switch {
		case errors.As(err, &ie):
			fmt.Fprintln(stderr, "mktk scale: failed on infrastructure:")
		case errors.As(err, &be):
			fmt.Fprintln(stderr, "mktk scale: a MultiKueue behaviour failed:")
		}
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// parseWorkers reads "2,5,10".
func parseWorkers(s string) ([]int, error) {
	var out []int
	for i, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--workers: item %d %q is not a number", i+1, f)
		}
		out = append(out, n)
	}
	return out, nil
}
