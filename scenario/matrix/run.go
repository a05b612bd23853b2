package matrix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/multikueue-testkit/testkit/internal/redact"
	"github.com/multikueue-testkit/testkit/internal/syncwriter"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
)

// Options shape Run.
type Options struct {
	// Targets are the columns, in order; at least one.
	Targets []Target
	// Workers per topology (the incremental setup has more: Setups);
	// default 2.
	Workers int
	// Integrations enabled on every setup but the resilient and HA ones;
	// default batch/job and JobSet.
	Integrations []string
	// Behaviours are the rows; default Canonical(CanonicalOptions{}).
	Behaviours []Behaviour
	// Only, when set, keeps the behaviours whose name it matches.
	Only *regexp.Regexp
	// Out is the directory written (Write); required.
	Out string
	// Start starts a setup's topology running target's Kueue; required.
	Start func(ctx context.Context, t Target, s Setup) (*topology.Topology, error)
	// BehaviourTimeout bounds one behaviour; default 20 minutes.
	BehaviourTimeout time.Duration
	// Progress receives a line per topology and per cell, with an
	// estimate of the time left; nil discards.
	Progress io.Writer
	// Parallel is how many targets run at once, each on its own
	// topologies; default 1 (one after another). A behaviour then runs
	// on a machine its sibling target also loads: a verdict that differs
	// from a run one at a time is worth a second look.
	Parallel int
	// Command and Machine are recorded in the matrix (how and where).
	Command, Machine string
}

// OutcomesFile holds every Outcome, one JSON object per line, from which
// Build can make the table again.
const OutcomesFile = "outcomes.jsonl"

// Run measures every behaviour on every target: per target and setup a
// fresh topology, its behaviours one after another, then the topology
// closed. A topology that does not start makes its behaviours'
// cells Infrastructure. Each cell's report is written as soon as it is
// known (ReportPath, with the failure's artifacts beside it), then the
// table (Write). The error is about the run itself (bad options, the
// context ended, the output not written), never a behaviour's verdict.
func Run(ctx context.Context, o Options) (Matrix, error) {
	if err := o.validate(); err != nil {
		return Matrix{}, err
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if len(o.Integrations) == 0 {
		o.Integrations = []string{topology.IntegrationBatchJob, topology.IntegrationJobSet}
	}
	if o.Behaviours == nil {
		o.Behaviours = Canonical(CanonicalOptions{})
	}
	if o.Only != nil {
		o.Behaviours = filter(o.Behaviours, o.Only)
		if len(o.Behaviours) == 0 {
			return Matrix{}, fmt.Errorf("matrix: Options.Only %q matches no behaviour", o.Only)
		}
	}
	if o.BehaviourTimeout == 0 {
		o.BehaviourTimeout = 20 * time.Minute
	}
	if o.Parallel == 0 {
		o.Parallel = 1
	}
	var progress io.Writer = io.Discard
	if o.Progress != nil {
		progress = syncwriter.New(o.Progress) // targets may run at once
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return Matrix{}, fmt.Errorf("matrix: Options.Out: %w", err)
	}
	rec, err := newRecorder(o.Out)
	if err != nil {
		return Matrix{}, err
	}
	defer rec.close()

	setups := map[string]Setup{}
	for _, s := range Setups(o.Workers, o.Integrations) {
		setups[s.Name] = s
	}
	groups := groupBySetup(o.Behaviours)
	eta := &estimate{start: time.Now(), total: len(o.Targets) * len(o.Behaviours)}
	for _, g := range groups {
		if _, ok := setups[g.setup]; !ok {
			return Matrix{}, fmt.Errorf("matrix: behaviour %q: unknown setup %q", g.behaviours[0].Name, g.setup)
		}
	}
	started := time.Now()
	cols := make([]Column, len(o.Targets))
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	for i, t := range o.Targets {
		sem <- struct{}{} // the targets start in their order
		wg.Go(func() {
			defer func() { <-sem }()
			col := Column{Label: t.Label(), Target: t}
			tStart := time.Now()
			for _, g := range groups {
				if ctx.Err() != nil {
					break
				}
				v := runSetup(ctx, o, t, setups[g.setup], g.behaviours, rec, eta, progress)
				if col.Kueue == "" {
					col.Kueue = v
				}
			}
			col.Seconds = seconds(time.Since(tStart))
			cols[i] = col
		})
	}
	wg.Wait()
	m := Build(o.Behaviours, cols, rec.outcomes)
	m.Started, m.Finished = started, time.Now()
	m.Command, m.Machine, m.Workers = o.Command, o.Machine, o.Workers
	werr := Write(o.Out, m)
	return m, errors.Join(ctx.Err(), rec.err, werr)
}

func (o Options) validate() error {
	var errs []error
	if len(o.Targets) == 0 {
		errs = append(errs, errors.New("matrix: Options.Targets: at least one Kueue version or source is needed"))
	}
	seen := map[string]bool{}
	for i, t := range o.Targets {
		switch {
		case t.Version == "" && t.Source == "":
			errs = append(errs, fmt.Errorf("matrix: Options.Targets[%d]: neither Version nor Source", i))
		case t.Version != "" && t.Source != "":
			errs = append(errs, fmt.Errorf("matrix: Options.Targets[%d]: both Version %q and Source %q; one names the Kueue", i, t.Version, t.Source))
		case seen[t.Label()]:
			errs = append(errs, fmt.Errorf("matrix: Options.Targets[%d]: %q twice", i, t.Label()))
		}
		seen[t.Label()] = true
	}
	if o.Parallel < 0 {
		errs = append(errs, fmt.Errorf("matrix: Options.Parallel: %d; want 1 or more targets at once, 0 for 1", o.Parallel))
	}
	if o.Workers < 0 || o.Workers == 1 || o.Workers > 20 {
		errs = append(errs, fmt.Errorf("matrix: Options.Workers: %d; want 2 to 20 (0 for 2): the scenarios need a worker to lose", o.Workers))
	}
	if o.Out == "" {
		errs = append(errs, errors.New("matrix: Options.Out: the directory to write is required"))
	}
	if o.Start == nil {
		errs = append(errs, errors.New("matrix: Options.Start: required (it starts a topology running the target's Kueue)"))
	}
	names := map[string]bool{}
	for i, b := range o.Behaviours {
		if b.Name == "" || names[b.Name] {
			errs = append(errs, fmt.Errorf("matrix: Options.Behaviours[%d]: name %q empty or repeated", i, b.Name))
		}
		names[b.Name] = true
		if b.Run == nil {
			errs = append(errs, fmt.Errorf("matrix: Options.Behaviours[%d] (%s): Run is nil", i, b.Name))
		}
	}
	return errors.Join(errs...)
}

func filter(bs []Behaviour, re *regexp.Regexp) []Behaviour {
	var out []Behaviour
	for _, b := range bs {
		if re.MatchString(b.Name) {
			out = append(out, b)
		}
	}
	return out
}

type group struct {
	setup      string
	behaviours []Behaviour
}

// groupBySetup keeps the behaviours' order within a setup and the setups'
// order of first appearance.
func groupBySetup(bs []Behaviour) []group {
	var gs []group
	at := map[string]int{}
	for _, b := range bs {
		i, ok := at[b.Setup]
		if !ok {
			i = len(gs)
			at[b.Setup] = i
			gs = append(gs, group{setup: b.Setup})
		}
		gs[i].behaviours = append(gs[i].behaviours, b)
	}
	return gs
}

// runSetup starts setup s for target t, runs its behaviours and closes it;
// it returns the Kueue version the manager reported.
func runSetup(ctx context.Context, o Options, t Target, s Setup, bs []Behaviour, rec *recorder, eta *estimate, progress io.Writer) string {
	label := t.Label()
	fmt.Fprintf(progress, "mktk: %s: starting setup %s (%s)\n", label, s.Name, s.Doc)
	start := time.Now()
	topo, err := o.Start(ctx, t, s)
	var env *scenario.Env
	if err == nil {
		env, err = scenario.Observe(ctx, topo)
	}
	if err != nil {
		detail := fmt.Sprintf("setup %s did not start (%s): %v", s.Name, time.Since(start).Round(time.Second), err)
		for _, b := range bs {
			rec.add(Outcome{Target: label, Behaviour: b.Name, Verdict: Infrastructure, Detail: detail, Started: start}, b, s, "")
			eta.cell(progress, label, b.Name, Infrastructure, 0)
		}
		if topo != nil {
			_ = topo.Close(context.WithoutCancel(ctx))
		}
		return ""
	}
	defer func() {
		env.Close()
		if err := topo.Close(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(progress, "mktk: %s: setup %s: teardown: %v\n", label, s.Name, err)
		}
	}()
	version := topo.Facts.Version
	fmt.Fprintf(progress, "mktk: %s: setup %s up in %s (Kueue %s)\n", label, s.Name, time.Since(start).Round(100*time.Millisecond), orUnknown(version))
	facts := describeFacts(topo.Facts)
	for _, b := range bs {
		if ctx.Err() != nil {
			return version
		}
		bctx, cancel := context.WithTimeout(ctx, o.BehaviourTimeout)
		artifacts := filepath.Join(o.Out, slug(label), slug(b.Name))
		env.Check.Artifacts = artifacts
		bStart := time.Now()
		err := b.Run(bctx, env)
		took := time.Since(bStart)
		cancel()
		v := Judge(err)
		detail := ""
		if err != nil {
			detail = redact.String(err.Error())
		}
		if _, serr := os.Stat(artifacts); serr == nil {
			detail += "\n\nartifacts: " + slug(b.Name) + "/ (beside this report)"
		}
		rec.add(Outcome{Target: label, Behaviour: b.Name, Verdict: v, Kueue: version, Detail: strings.TrimSpace(detail), Started: bStart, Seconds: seconds(took)}, b, s, facts)
		eta.cell(progress, label, b.Name, v, took)
	}
	return version
}

func orUnknown(v string) string {
	if v == "" {
		return "version not read"
	}
	return v
}

// describeFacts is the facts a report shows of the Kueue judged.
func describeFacts(f topology.KueueFacts) string {
	var gates []string
	for g, on := range f.FeatureGates {
		gates = append(gates, fmt.Sprintf("%s=%t", g, on))
	}
	sort.Strings(gates)
	s := fmt.Sprintf("Kueue %s (read from %s); dispatcher %s; integrations %v; feature gates set: %v", orUnknown(f.Version), f.Source, f.Dispatcher, f.Integrations, gates)
	if len(f.Assumed) > 0 {
		var names []string
		for n := range f.Assumed {
			names = append(names, n)
		}
		sort.Strings(names)
		s += fmt.Sprintf("; assumed, not read: %v", names)
	}
	return s
}

// estimate prints a line per cell with the time left, from the mean time
// per cell so far.
type estimate struct {
	mu          sync.Mutex
	start       time.Time
	total, done int
}

func (e *estimate) cell(w io.Writer, target, behaviour string, v Verdict, took time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.done++
	el := time.Since(e.start)
	left := time.Duration(float64(el) / float64(e.done) * float64(e.total-e.done))
	fmt.Fprintf(w, "mktk: [%d/%d] %s %s: %s in %s; elapsed %s, ETA %s\n", e.done, e.total, target, behaviour, v,
		took.Round(100*time.Millisecond), el.Round(time.Second), left.Round(time.Second))
}
