package matrix

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"
)

// The files Write writes.
const (
	JSONFile     = "matrix.json"
	MarkdownFile = "matrix.md"
	HTMLFile     = "matrix.html"
)

// Write writes m into dir as JSONFile, MarkdownFile and HTMLFile; the
// cells link to their reports (ReportPath), which Run writes.
func Write(dir string, m Matrix) error {
	j, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("matrix: %w", err)
	}
	var h bytes.Buffer
	if err := htmlPage.Execute(&h, m); err != nil {
		return fmt.Errorf("matrix: %s: %w", HTMLFile, err)
	}
	for name, b := range map[string][]byte{JSONFile: append(j, '\n'), MarkdownFile: []byte(Markdown(m)), HTMLFile: h.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("matrix: %w", err)
		}
	}
	return nil
}

// Markdown renders m as a Markdown table: rows are behaviours, columns
// targets.
func Markdown(m Matrix) string {
	var b strings.Builder
	b.WriteString("# MultiKueue behaviour matrix\n\n")
	fmt.Fprintf(&b, "Measured %s–%s on %s, 1 manager + %d workers per topology: `%s`.\n\n",
		m.Started.UTC().Format("2006-01-02 15:04Z"), m.Finished.UTC().Format("15:04Z"), m.Machine, m.Workers, m.Command)
	b.WriteString("| behaviour |")
	for _, c := range m.Columns {
		fmt.Fprintf(&b, " %s |", c.Label)
	}
	b.WriteString("\n| --- |")
	for range m.Columns {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range m.Rows {
		name := "`" + r.Behaviour + "`"
		if r.Differs {
			name = "**" + name + "** (differs)"
		}
		fmt.Fprintf(&b, "| %s |", name)
		for _, c := range r.Cells {
			fmt.Fprintf(&b, " %s |", mdCell(c))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%d cells not as the library expected (mismatch), %d failed on infrastructure. Each cell links to its report; a failure's artifacts are beside it.\n", m.Mismatches, m.Infrastructure)
	b.WriteString("\nColumns: ")
	for i, c := range m.Columns {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s ran Kueue %s in %.0fs", c.Label, orUnknown(c.Kueue), c.Seconds)
	}
	b.WriteString(".\n\nBehaviours:\n\n")
	for _, r := range m.Rows {
		fmt.Fprintf(&b, "- `%s` (%s, setup %s): %s\n", r.Behaviour, r.Kind, r.Setup, r.Doc)
	}
	return b.String()
}

func mdCell(c Cell) string {
	s := string(c.Verdict)
	if c.Report != "" {
		s = "[" + s + "](" + c.Report + ")"
	}
	if c.Verdict == Fail || c.Verdict == Infrastructure || c.Verdict == NotApplicable {
		if l := short(c.FirstLine, 110); l != "" {
			s += ": " + strings.NewReplacer("|", `\|`, "\n", " ").Replace(l)
		}
	}
	if c.Mismatch {
		s += fmt.Sprintf(" **⚠ expected %s**", c.Expected)
	}
	return s
}

func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

var htmlPage = template.Must(template.New(HTMLFile).Funcs(template.FuncMap{
	"short": short, "unknown": orUnknown,
	"utc": func(m Matrix) string {
		return m.Started.UTC().Format("2006-01-02 15:04Z") + "–" + m.Finished.UTC().Format("15:04Z")
	},
}).Parse(htmlTemplate))

//go:embed matrix.html.tmpl
var htmlTemplate string
