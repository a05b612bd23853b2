package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario/matrix"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// matrixCmd is `mktk matrix`: matrix.Run on local topologies.
func matrixCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mktk matrix", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kueue := fs.String("kueue", local.DefaultKueueVersion, "Kueue versions, comma-separated, one column each (built from the module proxy and cached)")
	var sources listFlag
	fs.Var(&sources, "source", "a Kueue checkout, one more column (repeatable)")
	workers := fs.Int("workers", 2, "workers per topology (2-20; the incremental setup has two more)")
	out := fs.String("out", "", "output directory (default $"+assert.EnvArtifacts+", else a new temp dir, printed)")
	only := fs.String("only", "", "a regular expression: run only the behaviours whose name it matches")
	integrations := fs.String("integrations", "batch/job,jobset.x-k8s.io/jobset", "Kueue integrations of the dispatch setups (ray.io/rayjob adds RayJob; its operator is built too)")
	stressJobs := fs.Int("stress-jobs", 30, "the small Stress's Jobs")
	parallel := fs.Int("parallel", 1, "versions (or sources) measured at once, each on its own topologies")
	bTimeout := fs.Duration("behaviour-timeout", 20*time.Minute, "bound on one behaviour")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mktk matrix [--kueue v0.17.1,v0.18.4,v0.19.2] [--source DIR ...] [--workers 2] [--parallel 1] [--out DIR]

For each Kueue (a version or a checkout), fresh local topologies (one per
setup: AllAtOnce, Incremental, External, resilient, HA), every canonical
scenario and every finding probe on them, each cell's verdict measured on
that version: pass, fail, n/a or infrastructure. Writes DIR/matrix.json
(schema multikueue-testkit/matrix/v1), DIR/matrix.md, DIR/matrix.html and
DIR/<version>/<behaviour>.txt, the report each cell links to (a failure's
artifacts beside it). Where the library expects a verdict for a version,
a cell that differs is reported as a mismatch. Exit status 1 when a cell
failed on infrastructure (the measurement is incomplete), 2 on bad flags;
MultiKueue failing a behaviour is a measurement, not an error.

flags:
`)
		fs.PrintDefaults()
	}
	if !parseNoArgs(fs, args, stderr) {
		return 2
	}
	var targets []matrix.Target
	for _, v := range splitList(*kueue) {
		if !strings.HasPrefix(v, "v") {
			fmt.Fprintf(stderr, "mktk matrix: --kueue: %q is not a version (v0.19.2)\n", v)
			return 2
		}
		targets = append(targets, matrix.Target{Version: v})
	}
	for _, s := range sources {
		abs, err := filepath.Abs(s)
		if err != nil {
			fmt.Fprintf(stderr, "mktk matrix: --source %q: %v\n", s, err)
			return 2
		}
		if _, err := os.Stat(filepath.Join(abs, "cmd", "kueue")); err != nil {
			fmt.Fprintf(stderr, "mktk matrix: --source %q: not a Kueue checkout (no cmd/kueue): %v\n", s, err)
			return 2
		}
		targets = append(targets, matrix.Target{Source: abs})
	}
	var re *regexp.Regexp
	if *only != "" {
		var err error
		if re, err = regexp.Compile(*only); err != nil {
			fmt.Fprintf(stderr, "mktk matrix: --only: %v\n", err)
			return 2
		}
	}
	ints := splitList(*integrations)
	kinds := observe.JobKindsFor(ints)
	for _, k := range []observe.Kind{observe.KindJob, observe.KindJobSet, observe.KindRayJob} {
		if !contains(kinds, k) {
			kinds = append(kinds, k) // a row that says n/a rather than no row
		}
	}
	dir := *out
	if dir == "" {
		dir = os.Getenv(assert.EnvArtifacts)
	}
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "mktk-matrix-"); err != nil {
			fmt.Fprintln(stderr, "mktk matrix:", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "mktk: writing to %s\n", dir)
	ctx, stop := signalContext()
	defer stop()
	m, err := matrix.Run(ctx, matrix.Options{
		Targets: targets, Workers: *workers, Parallel: *parallel, Integrations: ints, Only: re, Out: dir, Progress: stderr,
		Behaviours:       matrix.Canonical(matrix.CanonicalOptions{Kinds: kinds, StressJobs: *stressJobs}),
		BehaviourTimeout: *bTimeout,
		Command:          "mktk matrix " + strings.Join(args, " "),
		Machine:          machine(),
		Start: func(ctx context.Context, t matrix.Target, s matrix.Setup) (*topology.Topology, error) {
			return local.New(ctx, s.Options, local.Options{
				Kueue: local.KueueOptions{Version: t.Version, Source: t.Source},
				HA:    local.HA{Manager: s.HA},
			})
		},
	})
	if len(m.Rows) > 0 {
		for _, r := range m.Rows {
			if r.Differs {
				fmt.Fprintf(stderr, "mktk: %s differs between the versions:", r.Behaviour)
				for _, c := range r.Cells {
					fmt.Fprintf(stderr, " %s %s;", c.Target, c.Verdict)
				}
				fmt.Fprintln(stderr)
			}
			for _, c := range r.Cells {
				if c.Mismatch {
					fmt.Fprintf(stderr, "mktk: mismatch: %s on %s: %s, the library expected %s (%s); see %s\n", r.Behaviour, c.Target, c.Verdict, c.Expected, c.ExpectedWhy, filepath.Join(dir, c.Report))
				}
			}
		}
		fmt.Fprintf(stderr, "mktk: matrix: %s (and %s, %s)\n", filepath.Join(dir, matrix.HTMLFile), matrix.MarkdownFile, matrix.JSONFile)
		fmt.Fprintln(stdout, dir)
	}
	if err != nil {
		fmt.Fprintln(stderr, "mktk matrix:", err)
		if len(m.Rows) == 0 {
			return 2
		}
		return 1
	}
	if m.Infrastructure > 0 {
		fmt.Fprintf(stderr, "mktk matrix: %d cells failed on infrastructure, not on MultiKueue: the matrix is incomplete (their reports say why)\n", m.Infrastructure)
		return 1
	}
	return 0
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func contains(ks []observe.Kind, k observe.Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// machine says where the matrix ran: OS, architecture, CPUs, memory.
func machine() string {
	s := fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return s
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); n == 1 {
			return fmt.Sprintf("%s, %d GiB", s, (kb+512<<10)>>20)
		}
	}
	return s
}
