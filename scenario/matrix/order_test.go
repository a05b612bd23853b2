package matrix_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/scenario/matrix"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestIncrementalConfigOrderProbe runs the row Incremental/config-order on
// the default Kueue twice: as it comes (gate
// MultiKueueIncrementalDispatcherRespectConfigOrder on by default from
// v0.19.0), where it must pass, and with that gate turned off, where
// Kueue's dispatcher goes back to name order and the row must fail, say
// so, and be reported as a mismatch against the expectation of that
// version. The second is the violation built for real, on the same binary.
func TestIncrementalConfigOrderProbe(t *testing.T) {
	var row []matrix.Behaviour
	for _, b := range matrix.Canonical(matrix.CanonicalOptions{}) {
		if b.Name == "Incremental/config-order" {
			row = append(row, b)
		}
	}
	if len(row) != 1 {
		t.Fatal("no row Incremental/config-order in matrix.Canonical")
	}
	for _, tc := range []struct {
		name  string
		gates map[string]bool
		want  matrix.Verdict
		says  string
	}{
		{"as it comes", nil, matrix.Pass, ""},
		{"gate off", map[string]bool{assert.GateIncrementalDispatcherRespectConfigOrder: false}, matrix.Fail, ": the first by name, want the first 3 of MultiKueueConfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m, err := matrix.Run(context.Background(), matrix.Options{
				Targets:    []matrix.Target{{Version: local.DefaultKueueVersion}},
				Behaviours: row,
				Out:        dir,
				Progress:   testlog.Writer(t),
				Start: func(ctx context.Context, tg matrix.Target, s matrix.Setup) (*topology.Topology, error) {
					o := s.Options
					o.Progress = testlog.Writer(t)
					o.Kueue.FeatureGates = maps.Clone(tc.gates)
					return local.New(ctx, o, local.Options{Kueue: local.KueueOptions{Version: tg.Version}})
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			c := m.Rows[0].Cells[0]
			report, _ := os.ReadFile(filepath.Join(dir, c.Report))
			t.Logf("%s in %.1fs: %s", c.Verdict, c.Seconds, c.FirstLine)
			if c.Verdict != tc.want || !strings.Contains(string(report), tc.says) {
				t.Fatalf("%s, want %s saying %q; its report:\n%s", c.Verdict, tc.want, tc.says, report)
			}
			if c.Expected != matrix.Pass || c.Mismatch != (tc.want != matrix.Pass) || m.Mismatches != len(tc.gates) {
				t.Errorf("expected %q, mismatch %t, %d mismatches; want pass expected on %s and a mismatch only with the gate off", c.Expected, c.Mismatch, m.Mismatches, local.DefaultKueueVersion)
			}
		})
	}
}
