package matrix

import (
	"strings"
	"time"
)

// Build makes the table from recorded outcomes: one row per behaviour (in
// the order given), one cell per column; a missing outcome is NotRun. Each
// cell gets the expectation for the version its topology reported (else
// the target's version) and Mismatch when a measured pass or fail is not
// the expected verdict. It reads no cluster.
func Build(behaviours []Behaviour, columns []Column, outcomes []Outcome) Matrix {
	m := Matrix{Schema: Schema, Columns: columns}
	byKey := map[[2]string]Outcome{}
	for _, o := range outcomes {
		byKey[[2]string{o.Target, o.Behaviour}] = o
	}
	for _, b := range behaviours {
		row := Row{Behaviour: b.Name, Kind: b.Kind, Setup: b.Setup, Doc: b.Doc}
		seen := map[Verdict]bool{}
		for _, col := range columns {
			o, ok := byKey[[2]string{col.Label, b.Name}]
			c := Cell{Target: col.Label, Verdict: NotRun}
			if ok {
				c.Verdict, c.FirstLine, c.Seconds = o.Verdict, o.FirstLine(), o.Seconds
				c.Report = ReportPath(col.Label, b.Name)
			}
			v := o.Kueue
			if v == "" {
				v = col.Kueue
			}
			if v == "" {
				v = col.Target.Version
			}
			if b.Expect != nil && v != "" {
				c.Expected, c.ExpectedWhy = b.Expect(v)
			}
			if c.Expected != "" && (c.Verdict == Pass || c.Verdict == Fail) && c.Verdict != c.Expected {
				c.Mismatch = true
				m.Mismatches++
			}
			if c.Verdict == Infrastructure {
				m.Infrastructure++
			}
			if c.Verdict == Pass || c.Verdict == Fail {
				seen[c.Verdict] = true
			}
			row.Cells = append(row.Cells, c)
		}
		row.Differs = len(seen) > 1
		m.Rows = append(m.Rows, row)
	}
	return m
}

// ReportPath is where a cell's report lives, relative to the matrix
// directory: <target>/<behaviour>.txt, both made file-name safe.
func ReportPath(target, behaviour string) string {
	return slug(target) + "/" + slug(behaviour) + ".txt"
}

// slug keeps letters, digits, '.', '_' and '-', and turns every other run
// of characters into one '-'.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r == '.' || r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')
		if ok {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }
