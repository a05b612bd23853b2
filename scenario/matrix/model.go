package matrix

import (
	"path/filepath"
	"strings"
	"time"
)

// Schema names the format of matrix.json and its version. A field is never
// renamed or given another meaning within a schema version.
const Schema = "multikueue-testkit/matrix/v1"

// Verdict is a cell's measured outcome.
type Verdict string

const (
	// Pass: the behaviour held (for a finding: the defect did not show).
	Pass Verdict = "pass"
	// Fail: the behaviour did not hold (for a finding: the defect showed).
	Fail Verdict = "fail"
	// NotApplicable: the behaviour does not apply to this Kueue or setup.
	NotApplicable Verdict = "n/a"
	// Infrastructure: the test bed failed (a cluster did not start, an API
	// server unreachable), so nothing is said of MultiKueue.
	Infrastructure Verdict = "infrastructure"
	// NotRun: no outcome was recorded (the run was cancelled first).
	NotRun Verdict = "not run"
)

// Target is one column: a Kueue release built from the module proxy
// (Version) or a checkout (Source).
type Target struct {
	Version string `json:"version,omitempty"`
	Source  string `json:"source,omitempty"`
}

// Label names the column: the version, or "source:<dir's base name>".
func (t Target) Label() string {
	if t.Source != "" {
		return "source:" + filepath.Base(t.Source)
	}
	return t.Version
}

// Kind of a behaviour.
type Kind string

const (
	// KindScenario is a canonical scenario (scenario.Setup, Dispatch, ...).
	KindScenario Kind = "scenario"
	// KindFinding is a probe of a known Kueue defect.
	KindFinding Kind = "finding"
	// KindFeature is a behaviour a Kueue release added (a dispatcher
	// rule, a field honoured): it fails where the release lacks it.
	KindFeature Kind = "feature"
)

// Outcome is what one behaviour's run on one target recorded: the input
// of Build.
type Outcome struct {
	Target    string  `json:"target"`
	Behaviour string  `json:"behaviour"`
	Verdict   Verdict `json:"verdict"`
	// Kueue is the version the topology's manager ran, read from the
	// cluster (Topology.Facts.Version); "" when it could not be read.
	Kueue string `json:"kueue"`
	// Detail is the whole failure (or why not applicable); empty on pass.
	Detail  string    `json:"detail,omitempty"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
}

// FirstLine is the first line of Detail.
func (o Outcome) FirstLine() string {
	l, _, _ := strings.Cut(strings.TrimSpace(o.Detail), "\n")
	return l
}

// Column is one target as run.
type Column struct {
	Label  string `json:"label"`
	Target Target `json:"target"`
	// Kueue is the version the clusters reported ("" when never read).
	Kueue   string  `json:"kueue"`
	Seconds float64 `json:"seconds"`
}

// Cell is one behaviour on one target.
type Cell struct {
	Target    string  `json:"target"`
	Verdict   Verdict `json:"verdict"`
	FirstLine string  `json:"first_line,omitempty"`
	// Report is the cell's report, relative to the matrix directory.
	Report  string  `json:"report,omitempty"`
	Seconds float64 `json:"seconds"`
	// Expected is the verdict the library expected for this version
	// ("" when it expects nothing particular or the version is unknown),
	// ExpectedWhy the reason (which change, which release).
	Expected    Verdict `json:"expected,omitempty"`
	ExpectedWhy string  `json:"expected_why,omitempty"`
	// Mismatch: a pass or fail that is not the expected verdict.
	Mismatch bool `json:"mismatch"`
}

// Row is one behaviour across the targets.
type Row struct {
	Behaviour string `json:"behaviour"`
	Kind      Kind   `json:"kind"`
	Setup     string `json:"setup"`
	Doc       string `json:"doc"`
	Cells     []Cell `json:"cells"`
	// Differs: the measured verdicts are not all the same.
	Differs bool `json:"differs"`
}

// Matrix is matrix.json.
type Matrix struct {
	Schema   string    `json:"schema"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Command and Machine say how and where it was measured.
	Command string   `json:"command"`
	Machine string   `json:"machine"`
	Workers int      `json:"workers"`
	Columns []Column `json:"columns"`
	Rows    []Row    `json:"rows"`
	// Mismatches counts cells whose verdict is not the expected one.
	Mismatches int `json:"mismatches"`
	// Infrastructure counts cells the test bed failed.
	Infrastructure int `json:"infrastructure"`
}
