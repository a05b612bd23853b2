package matrix

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// recorder keeps the outcomes, appends each to OutcomesFile and writes its
// cell's report.
type recorder struct {
	mu       sync.Mutex // targets may run at once (Options.Parallel)
	dir      string
	f        *os.File
	outcomes []Outcome
	err      error
}

func newRecorder(dir string) (*recorder, error) {
	f, err := os.Create(filepath.Join(dir, OutcomesFile))
	if err != nil {
		return nil, fmt.Errorf("matrix: %w", err)
	}
	return &recorder{dir: dir, f: f}, nil
}

func (r *recorder) add(o Outcome, b Behaviour, s Setup, facts string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, o)
	line, err := json.Marshal(o)
	if err == nil {
		_, err = r.f.Write(append(line, '\n'))
	}
	p := filepath.Join(r.dir, ReportPath(o.Target, o.Behaviour))
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p), 0o755)
	}
	if err == nil {
		err = os.WriteFile(p, []byte(cellReport(o, b, s, facts)), 0o644)
	}
	if err != nil {
		r.err = errors.Join(r.err, fmt.Errorf("matrix: record %s %s: %w", o.Target, o.Behaviour, err))
	}
}

func (r *recorder) close() { _ = r.f.Close() }

// cellReport is the text of a cell's report.
func cellReport(o Outcome, b Behaviour, s Setup, facts string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "behaviour: %s (%s)\nchecks:    %s\ntarget:    %s\nsetup:     %s: %s\n", b.Name, b.Kind, b.Doc, o.Target, s.Name, s.Doc)
	if facts != "" {
		fmt.Fprintf(&sb, "kueue:     %s\n", facts)
	}
	fmt.Fprintf(&sb, "verdict:   %s\n", o.Verdict)
	v := o.Kueue
	if b.Expect != nil && v != "" {
		if want, why := b.Expect(v); want != "" {
			fmt.Fprintf(&sb, "expected:  %s (%s)", want, why)
			if (o.Verdict == Pass || o.Verdict == Fail) && o.Verdict != want {
				sb.WriteString(" — MISMATCH")
			}
			sb.WriteString("\n")
		}
	}
	fmt.Fprintf(&sb, "started:   %s, took %.1fs\n", o.Started.UTC().Format("2006-01-02 15:04:05Z"), o.Seconds)
	if o.Detail != "" {
		sb.WriteString("\n" + o.Detail + "\n")
	}
	return sb.String()
}

// ReadOutcomes reads an OutcomesFile.
func ReadOutcomes(r io.Reader) ([]Outcome, error) {
	var out []Outcome
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var o Outcome
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			return nil, fmt.Errorf("matrix: %s:%d: %w", OutcomesFile, n, err)
		}
		out = append(out, o)
	}
	return out, sc.Err()
}
