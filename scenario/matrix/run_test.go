package matrix_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/scenario/matrix"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestRunOnTheDefaultKueue runs a small matrix for real: the default Kueue,
// the AllAtOnce setup, three behaviours (a scenario, a kind's dispatch and
// a finding probe). Every cell is measured, its report written, the JSON
// validates, and the probe's verdict is the one expected of that version
// (Kueue v0.19 has the fix), so no cell is a mismatch.
func TestRunOnTheDefaultKueue(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m, err := matrix.Run(ctx, matrix.Options{
		Targets:  []matrix.Target{{Version: local.DefaultKueueVersion}},
		Only:     regexp.MustCompile(`^(Setup|Dispatch/Job|finding/foreign-same-name-job)$`),
		Out:      dir,
		Progress: testlog.Writer(t),
		Command:  "go test ./scenario/matrix -run TestRunOnTheDefaultKueue",
		Start: func(ctx context.Context, tg matrix.Target, s matrix.Setup) (*topology.Topology, error) {
			o := s.Options
			o.Progress = testlog.Writer(t)
			return local.New(ctx, o, local.Options{Kueue: local.KueueOptions{Version: tg.Version}})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Rows) != 3 || len(m.Columns) != 1 || m.Columns[0].Kueue != local.DefaultKueueVersion {
		t.Fatalf("rows %d, columns %+v; want 3 rows and one column that ran %s", len(m.Rows), m.Columns, local.DefaultKueueVersion)
	}
	for _, r := range m.Rows {
		c := r.Cells[0]
		t.Logf("%s: %s in %.1fs %s", r.Behaviour, c.Verdict, c.Seconds, c.FirstLine)
		if c.Verdict != matrix.Pass {
			b, _ := os.ReadFile(filepath.Join(dir, c.Report))
			t.Errorf("%s: %s, want pass; its report:\n%s", r.Behaviour, c.Verdict, b)
		}
		report, err := os.ReadFile(filepath.Join(dir, c.Report))
		if err != nil || !strings.Contains(string(report), "verdict:   "+string(c.Verdict)) || !strings.Contains(string(report), "Kueue "+local.DefaultKueueVersion) {
			t.Errorf("%s: report %s (%v) does not say the verdict and the Kueue judged:\n%s", r.Behaviour, c.Report, err, report)
		}
	}
	if probe := m.Rows[2].Cells[0]; probe.Expected != matrix.Pass || probe.Mismatch {
		t.Errorf("the probe's expectation on %s: %q (mismatch %t), want pass: #11877 is in v0.19.0", local.DefaultKueueVersion, probe.Expected, probe.Mismatch)
	}
	doc, err := os.ReadFile(filepath.Join(dir, matrix.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := matrix.Validate(doc); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{matrix.MarkdownFile, matrix.HTMLFile, matrix.OutcomesFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestRunInParallelKeepsTheColumns runs three targets two at a time, with a
// Start that fails (no clusters): every cell is recorded once, as
// infrastructure, and the columns stay in the targets' order.
func TestRunInParallelKeepsTheColumns(t *testing.T) {
	targets := []matrix.Target{{Version: "v0.17.1"}, {Version: "v0.18.4"}, {Version: "v0.19.2"}}
	var started atomic.Int32
	m, err := matrix.Run(context.Background(), matrix.Options{
		Targets: targets, Parallel: 2, Out: t.TempDir(), Progress: testlog.Writer(t),
		Start: func(ctx context.Context, tg matrix.Target, s matrix.Setup) (*topology.Topology, error) {
			started.Add(1)
			return nil, fmt.Errorf("no topology for %s in this test", tg.Version)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := int(started.Load()); n != len(targets)*len(matrix.Setups(2, nil)) {
		t.Errorf("%d setups started, want %d", n, len(targets)*len(matrix.Setups(2, nil)))
	}
	for i, c := range m.Columns {
		if c.Label != targets[i].Label() {
			t.Errorf("column %d is %q, want %q", i, c.Label, targets[i].Label())
		}
	}
	for _, r := range m.Rows {
		for i, c := range r.Cells {
			if c.Verdict != matrix.Infrastructure || !strings.Contains(c.FirstLine, "no topology for "+targets[i].Version) {
				t.Errorf("%s on %s: %s %q, want infrastructure naming the target", r.Behaviour, targets[i].Label(), c.Verdict, c.FirstLine)
			}
		}
	}
}
