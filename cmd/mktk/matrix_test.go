package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/scenario/matrix"
)

// TestMatrixRefusesBadFlags: exit status 2 and one line naming the flag,
// nothing started.
func TestMatrixRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kueue", "0.19.2"}, `--kueue: "0.19.2" is not a version`},
		{[]string{"--source", t.TempDir()}, "not a Kueue checkout (no cmd/kueue)"},
		{[]string{"--only", "("}, "--only:"},
		{[]string{"--workers", "1", "--out", t.TempDir()}, "Options.Workers: 1"},
		{[]string{"--parallel", "-1", "--out", t.TempDir()}, "Options.Parallel: -1"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"matrix"}, tc.args...), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("mktk matrix %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestMatrixCommand is the acceptance run, opt-in (tens of minutes):
// MKTK_MATRIX_KUEUE=v0.18.4,v0.19.2 runs `mktk matrix --kueue
// $MKTK_MATRIX_KUEUE --workers 2` into $MKTK_MATRIX_OUT (else a temp dir),
// validates matrix.json and wants at least one behaviour whose verdict
// differs between the versions, with the evidence in its reports.
func TestMatrixCommand(t *testing.T) {
	versions := os.Getenv("MKTK_MATRIX_KUEUE")
	if versions == "" {
		t.Skip("opt-in: MKTK_MATRIX_KUEUE=v0.18.4,v0.19.2 (tens of minutes; not in CI)")
	}
	out := os.Getenv("MKTK_MATRIX_OUT")
	if out == "" {
		out = t.TempDir()
	}
	start := time.Now()
	var stdout bytes.Buffer
	code := run([]string{"matrix", "--kueue", versions, "--workers", "2", "--out", out}, &stdout, os.Stderr)
	t.Logf("mktk matrix --kueue %s --workers 2: exit %d in %s", versions, code, time.Since(start).Round(time.Second))
	doc, err := os.ReadFile(filepath.Join(out, matrix.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := matrix.Validate(doc); err != nil {
		t.Fatal(err)
	}
	var m matrix.Matrix
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	differs := 0
	for _, r := range m.Rows {
		if !r.Differs {
			continue
		}
		differs++
		for _, c := range r.Cells {
			b, err := os.ReadFile(filepath.Join(out, c.Report))
			if err != nil {
				t.Errorf("%s on %s: %v", r.Behaviour, c.Target, err)
				continue
			}
			t.Logf("%s on %s: %s\n%s", r.Behaviour, c.Target, c.Verdict, b)
		}
	}
	if differs == 0 && len(m.Columns) > 1 {
		t.Errorf("no behaviour differs between %s", versions)
	}
	if code != 0 {
		t.Errorf("exit %d: %d cells failed on infrastructure", code, m.Infrastructure)
	}
}
