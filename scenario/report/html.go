package report

import (
	"encoding/base64"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// HTMLFile is the self-contained page WriteHTML writes.
const HTMLFile = "report.html"

// WriteHTML writes dir/report.html: every run's verdicts (each assertion's
// pass and fail counts, each failure with its class and message), its
// per-cluster figures, and the plots among files, inlined as data URIs so
// that the page stands alone. It returns the page's path.
func WriteHTML(dir string, runs []RunReport, files []string) (string, error) {
	img := func(name string) template.URL {
		p := filepath.Join(dir, name)
		if !slices.Contains(files, p) {
			return ""
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return ""
		}
		return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b))
	}
	type verdicts struct {
		Assertion, Phase string
		Passed, Failed   int
	}
	type runView struct {
		RunReport
		Verdicts  []verdicts
		Failures  []Assertion
		Latency   template.URL
		Placement template.URL
	}
	view := struct {
		Schema    string
		Generated string
		Runs      []runView
		Startup   template.URL
		Memory    template.URL
		Passed    bool
	}{Schema: Schema, Generated: time.Now().Format(time.RFC3339), Startup: img(StartupPlot), Memory: img(MemoryPlot), Passed: true}
	for _, rr := range runs {
		rv := runView{RunReport: rr, Latency: img(LatencyPlot(rr.Run.Run)), Placement: img(PlacementPlot(rr.Run.Run))}
		idx := map[[2]string]int{}
		for _, a := range rr.Assertions {
			k := [2]string{a.Phase, a.Assertion}
			i, ok := idx[k]
			if !ok {
				i = len(rv.Verdicts)
				idx[k] = i
				rv.Verdicts = append(rv.Verdicts, verdicts{Assertion: a.Assertion, Phase: a.Phase})
			}
			if a.Passed {
				rv.Verdicts[i].Passed++
			} else {
				rv.Verdicts[i].Failed++
				rv.Failures = append(rv.Failures, a)
			}
		}
		view.Passed = view.Passed && rr.Run.Passed
		view.Runs = append(view.Runs, rv)
	}
	t, err := template.New("report").Funcs(template.FuncMap{
		"mib": func(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) },
		"f1":  func(v float64) string { return fmt.Sprintf("%.1f", v) },
		"opt": func(v *float64) string {
			if v == nil {
				return "–"
			}
			return fmt.Sprintf("%.0f", *v)
		},
	}).Parse(pageTemplate)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, HTMLFile)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := t.Execute(f, view); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

const pageTemplate = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>MultiKueue scale report</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f0f0f0}td.l,th.l{text-align:left}.pass{color:#187a18;font-weight:bold}.fail{color:#b01c1c;font-weight:bold}
pre{background:#f7f7f7;padding:.6em;white-space:pre-wrap;max-width:110em}img{max-width:100%;border:1px solid #ddd;margin:.5em 0}
</style></head><body>
<h1>MultiKueue scale report: <span class="{{if .Passed}}pass">PASSED{{else}}fail">FAILED{{end}}</span></h1>
<p>Generated {{.Generated}}; records in report.jsonl and clusters/*.jsonl, schema <code>{{.Schema}}</code>.</p>
<h2>Runs</h2>
<table><tr><th class="l">run</th><th>workers</th><th>jobs</th><th>start-up s</th><th>load s</th><th>MiB after start</th><th>MiB peak</th><th class="l">verdict</th><th class="l">phase</th><th class="l">failed on</th></tr>
{{range .Runs}}<tr><td class="l"><a href="#{{.Run.Run}}">{{.Run.Run}}</a></td><td>{{.Run.Workers}}</td><td>{{.Run.Jobs}}</td><td>{{f1 .Run.StartupSeconds}}</td><td>{{f1 .Run.LoadSeconds}}</td><td>{{mib .Run.MemoryAfterStartBytes}}</td><td>{{mib .Run.MemoryPeakBytes}}</td>
<td class="l">{{if .Run.Passed}}<span class="pass">pass</span>{{else}}<span class="fail">fail</span>{{end}}</td><td class="l">{{.Run.Phase}}</td><td class="l">{{.Run.FailureClass}}</td></tr>
{{end}}</table>
{{if .Startup}}<img alt="start-up time vs workers" src="{{.Startup}}">{{end}}
{{if .Memory}}<img alt="memory vs workers" src="{{.Memory}}">{{end}}
{{range .Runs}}<h2 id="{{.Run.Run}}">Run {{.Run.Run}}: 1 manager + {{.Run.Workers}} workers, {{.Run.Jobs}} jobs — {{if .Run.Passed}}<span class="pass">pass</span>{{else}}<span class="fail">fail ({{.Run.FailureClass}}, in {{.Run.Phase}})</span>{{end}}</h2>
{{if .Run.Error}}<pre>{{.Run.Error}}</pre>{{end}}
{{if .Run.Artifacts}}<p>Log tails (redacted): <code>{{.Run.Artifacts}}</code></p>{{end}}
<h3>Verdicts</h3>
<table><tr><th class="l">phase</th><th class="l">assertion</th><th>passed</th><th>failed</th></tr>
{{range .Verdicts}}<tr><td class="l">{{.Phase}}</td><td class="l">{{.Assertion}}</td><td>{{.Passed}}</td><td>{{if .Failed}}<span class="fail">{{.Failed}}</span>{{else}}0{{end}}</td></tr>
{{end}}</table>
{{range .Failures}}<h4>{{.Assertion}} {{.Object}} — cluster {{.Cluster}}, {{.Class}}</h4><pre>{{.Message}}</pre>
{{end}}
{{if .Clusters}}<h3>Clusters</h3>
<table><tr><th class="l">cluster</th><th>placements</th><th>copies</th><th>dispatch p50/p90/p99 ms</th><th>remote admission p50/p99 ms</th><th>sync lag p50/p99 ms</th><th>loser cleanup p50/p99 ms</th><th>API requests</th><th>MiB</th><th>Active at s</th><th>Active transitions</th></tr>
{{range .Clusters}}<tr><td class="l">{{.Cluster}} ({{.Role}})</td><td>{{.Placements}}</td><td>{{.RemoteCopies}}</td>
<td>{{f1 .DispatchLatencyMS.P50}} / {{f1 .DispatchLatencyMS.P90}} / {{f1 .DispatchLatencyMS.P99}}</td><td>{{f1 .RemoteAdmissionMS.P50}} / {{f1 .RemoteAdmissionMS.P99}}</td>
<td>{{f1 .StatusSyncLagMS.P50}} / {{f1 .StatusSyncLagMS.P99}}</td><td>{{f1 .LoserCleanupMS.P50}} / {{f1 .LoserCleanupMS.P99}}</td>
<td>{{.APIRequests}}</td><td>{{mib .MemoryBytes}}</td><td>{{opt .ActiveSeconds}}</td><td>{{.ActiveTransitions}}</td></tr>
{{end}}</table>{{end}}
{{if .Transitions}}<h3>MultiKueueCluster Active transitions</h3>
<table><tr><th class="l">worker</th><th>at s</th><th class="l">active</th><th class="l">reason</th><th class="l">message</th></tr>
{{range .Transitions}}<tr><td class="l">{{.Cluster}}</td><td>{{f1 .OffsetSeconds}}</td><td class="l">{{.Active}}</td><td class="l">{{.Reason}}</td><td class="l">{{.Message}}</td></tr>
{{end}}</table>{{end}}
{{if .Latency}}<img alt="latency CDFs of {{.Run.Run}}" src="{{.Latency}}">{{end}}
{{if .Placement}}<img alt="placements of {{.Run.Run}}" src="{{.Placement}}">{{end}}
{{end}}
</body></html>
`
