package matrix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/scenario"
)

// recorded reads testdata/outcomes.jsonl: two targets, each class of cell.
func recorded(t *testing.T) []Outcome {
	t.Helper()
	f, err := os.Open("testdata/outcomes.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := ReadOutcomes(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rowsOf are the behaviours of the recorded outcomes, from Canonical (the
// expectations are the library's own), plus one nobody ran.
func rowsOf(t *testing.T) []Behaviour {
	t.Helper()
	want := []string{"Setup", "Dispatch/RayJob", "Incremental/config-order", "ManagerRestart", "Failover"}
	var out []Behaviour
	for _, name := range want {
		for _, b := range Canonical(CanonicalOptions{}) {
			if b.Name == name {
				out = append(out, b)
			}
		}
	}
	if len(out) != len(want) {
		t.Fatalf("Canonical lacks some of %v", want)
	}
	return out
}

// TestBuildFromRecordedOutcomes builds the table from recorded results (no
// clusters) and checks every class of cell: pass, fail, n/a,
// infrastructure, not run; a behaviour added in a release and a regression
// since one, each measured as expected or not (mismatch); and which rows
// differ between the versions.
func TestBuildFromRecordedOutcomes(t *testing.T) {
	cols := []Column{{Label: "v0.18.4", Target: Target{Version: "v0.18.4"}, Kueue: "v0.18.4"}, {Label: "v0.19.2", Target: Target{Version: "v0.19.2"}}}
	m := Build(rowsOf(t), cols, recorded(t))
	cell := func(row, col int) Cell { return m.Rows[row].Cells[col] }
	for _, tc := range []struct {
		row, col int
		verdict  Verdict
		expected Verdict
		mismatch bool
		line     string
	}{
		{0, 0, Pass, "", false, ""},
		{0, 1, Infrastructure, "", false, "setup allatonce did not start"},
		{1, 0, NotApplicable, "", false, "not applicable: the topology's integrations"},
		{1, 1, NotRun, "", false, ""},
		{2, 0, Fail, Fail, false, `cluster "manager": the first nomination`},
		{2, 1, Pass, Pass, false, ""},
		// ManagerRestart: the library expects ErrNotResumed from v0.18.0;
		// both runs passed, so both are mismatches, reported.
		{3, 0, Pass, Fail, true, ""},
		{3, 1, Pass, Fail, true, ""},
		// Failover was not run anywhere: no mismatch for what was not measured.
		{4, 0, NotRun, Fail, false, ""},
	} {
		c := cell(tc.row, tc.col)
		name := m.Rows[tc.row].Behaviour + "@" + c.Target
		if c.Verdict != tc.verdict || c.Expected != tc.expected || c.Mismatch != tc.mismatch || !strings.HasPrefix(c.FirstLine, tc.line) {
			t.Errorf("%s: got %s (expected %q, mismatch %t, line %q); want %s (expected %q, mismatch %t, line %q…)",
				name, c.Verdict, c.Expected, c.Mismatch, c.FirstLine, tc.verdict, tc.expected, tc.mismatch, tc.line)
		}
		if (c.Verdict == NotRun) != (c.Report == "") {
			t.Errorf("%s: report %q with verdict %s: every recorded cell links its report, no other", name, c.Report, c.Verdict)
		}
	}
	if strings.Contains(cell(2, 0).FirstLine, "\n") {
		t.Errorf("first line has a newline: %q", cell(2, 0).FirstLine)
	}
	if m.Mismatches != 2 || m.Infrastructure != 1 {
		t.Errorf("mismatches %d, infrastructure %d; want 2 and 1", m.Mismatches, m.Infrastructure)
	}
	for i, want := range []bool{false, false, true, false, false} {
		if m.Rows[i].Differs != want {
			t.Errorf("row %s: differs %t, want %t (only measured pass/fail count)", m.Rows[i].Behaviour, m.Rows[i].Differs, want)
		}
	}
}

// TestJudgeClasses gives Judge the errors the scenarios return.
func TestJudgeClasses(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Verdict
	}{
		{nil, Pass},
		{&InapplicableError{Why: "no RayJob"}, NotApplicable},
		{fmt.Errorf("wrapped: %w", &scenario.NeedsLifecycleError{Scenario: "WorkerOutage", Cluster: "worker-1", Provider: "kind"}), NotApplicable},
		{&scenario.InfraError{Cluster: "worker-1", Op: "start the topology", Err: errors.New("exited")}, Infrastructure},
		{errors.Join(&assert.Failure{Assertion: "ExactlyOnceAdmitted"}, &scenario.InfraError{Op: "list", Err: errors.New("refused")}), Infrastructure},
		{&assert.Failure{Assertion: "StatusSynced", Problems: []string{"never"}}, Fail},
		{errors.New("something else"), Fail},
	} {
		if got := Judge(tc.err); got != tc.want {
			t.Errorf("Judge(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestExpectations(t *testing.T) {
	fixed := FixedIn("v0.19.0", "x")
	broken := BrokenSince("v0.18.0", "y")
	added := AddedIn("v0.19.0", "z")
	for _, tc := range []struct {
		f    func(string) (Verdict, string)
		v    string
		want Verdict
	}{
		{fixed, "v0.18.4", Fail}, {fixed, "v0.19.0", Pass}, {fixed, "v0.19.2", Pass}, {fixed, "", ""},
		{broken, "v0.17.1", Pass}, {broken, "v0.18.0", Fail}, {broken, "v0.19.2", Fail}, {broken, "devel", ""},
		{added, "v0.18.4", Fail}, {added, "v0.19.0", Pass}, {added, "v0.19.2", Pass}, {added, "", ""},
	} {
		if got, why := tc.f(tc.v); got != tc.want || (got != "" && why == "") {
			t.Errorf("%s: %s (%q), want %s with a reason", tc.v, got, why, tc.want)
		}
	}
}

// TestWriteValidates writes the recorded table and validates its JSON
// against the schema; the Markdown and HTML carry every cell.
func TestWriteValidates(t *testing.T) {
	cols := []Column{{Label: "v0.18.4", Target: Target{Version: "v0.18.4"}, Kueue: "v0.18.4", Seconds: 300}, {Label: "v0.19.2", Target: Target{Version: "v0.19.2"}, Seconds: 12}}
	m := Build(rowsOf(t), cols, recorded(t))
	m.Started, m.Finished = time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC), time.Date(2026, 12, 3, 13, 20, 0, 0, time.UTC)
	m.Command, m.Machine, m.Workers = "mktk matrix --kueue v0.18.4,v0.19.2", "linux/amd64, 2 CPUs", 2
	dir := t.TempDir()
	if err := Write(dir, m); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(doc); err != nil {
		t.Fatalf("the written matrix does not validate: %v", err)
	}
	bad := strings.Replace(string(doc), `"verdict": "pass"`, `"verdict": "maybe"`, 1)
	if err := Validate([]byte(bad)); err == nil || !strings.Contains(err.Error(), "verdict") {
		t.Errorf("a cell with verdict \"maybe\" validated (err %v)", err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	html, _ := os.ReadFile(filepath.Join(dir, HTMLFile))
	for _, want := range []string{"| `Setup` |", "**`Incremental/config-order`** (differs)", "[fail](v0.18.4/Incremental-config-order.txt): cluster \"manager\": the first nomination", "**⚠ expected fail**", "not run"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("matrix.md lacks %q:\n%s", want, md)
		}
	}
	for _, want := range []string{`<td class="fail"><a href="v0.18.4/Incremental-config-order.txt">fail</a>`, `class="infra"`, `class="mismatch">expected fail`, "Kueue version not read"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("matrix.html lacks %q", want)
		}
	}
}

// TestRunRefusesBadOptions: one error naming each bad field, nothing started.
func TestRunRefusesBadOptions(t *testing.T) {
	_, err := Run(context.Background(), Options{Targets: []Target{{}, {Version: "v0.19.2", Source: "/x"}, {Version: "v0.19.2"}, {Version: "v0.19.2"}}, Workers: 1, Parallel: -1})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"Options.Targets[0]: neither", "Options.Targets[1]: both", "Options.Targets[3]: \"v0.19.2\" twice", "Options.Workers: 1", "Options.Parallel: -1", "Options.Out", "Options.Start"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestCanonicalNamesAreUniqueAndSetupsKnown(t *testing.T) {
	setups := map[string]bool{}
	for _, s := range Setups(2, nil) {
		setups[s.Name] = true
	}
	seen := map[string]bool{}
	for _, b := range Canonical(CanonicalOptions{}) {
		if seen[b.Name] || !setups[b.Setup] || b.Run == nil || b.Doc == "" {
			t.Errorf("behaviour %q: repeated %t, setup %q known %t, Run nil %t, Doc empty %t", b.Name, seen[b.Name], b.Setup, setups[b.Setup], b.Run == nil, b.Doc == "")
		}
		seen[b.Name] = true
	}
}
