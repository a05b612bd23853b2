package report

import (
	_ "embed"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
)

// SchemaJSON is schema.json: the JSON Schema (2020-12) every line of
// report.jsonl and clusters/<cluster>.jsonl satisfies.
//
//go:embed schema.json
var schemaJSON []byte

// SchemaJSON returns the JSON Schema of the records.
func SchemaJSON() []byte { return append([]byte(nil), schemaJSON...) }

// File names under a report directory.
const (
	// AggregateFile holds every record of every run.
	AggregateFile = "report.jsonl"
	// ClustersDir holds one <cluster>.jsonl per cluster name.
	ClustersDir = "clusters"
)

// Lines returns rr's records, one JSON value each, in file order: the run,
// its clusters, transitions, workloads and assertions.
func (rr RunReport) Lines() []any {
	rr.Run.Header = header(RecordRun, rr.Run.Run, "")
	out := []any{rr.Run}
	for _, c := range rr.Clusters {
		out = append(out, c)
	}
	for _, t := range rr.Transitions {
		out = append(out, t)
	}
	for _, w := range rr.Workloads {
		out = append(out, w)
	}
	for _, a := range rr.Assertions {
		out = append(out, a)
	}
	return out
}

// safeName makes s a file name.
func safeName(s string) string {
	return regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(s, "_")
}

// Append adds rr's records to dir/report.jsonl and each keyed record to
// dir/clusters/<cluster>.jsonl, creating files and directories as needed.
func Append(dir string, rr RunReport) (err error) {
	if err := os.MkdirAll(filepath.Join(dir, ClustersDir), 0o755); err != nil {
		return err
	}
	files := map[string]*os.File{}
	open := func(path string) (*os.File, error) {
		if f := files[path]; f != nil {
			return f, nil
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		files[path] = f
		return f, nil
	}
	defer func() {
		for _, f := range files {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}()
	for _, l := range rr.Lines() {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		b = append(b, '\n')
		paths := []string{filepath.Join(dir, AggregateFile)}
		if c := clusterOf(l); c != "" {
			paths = append(paths, filepath.Join(dir, ClustersDir, safeName(c)+".jsonl"))
		}
		for _, p := range paths {
			f, err := open(p)
			if err != nil {
				return err
			}
			if _, err := f.Write(b); err != nil {
				return err
			}
		}
	}
	return nil
}

func clusterOf(l any) string {
	switch v := l.(type) {
	case Cluster:
		return v.Cluster
	case Workload:
		return v.Cluster
	case Transition:
		return v.Cluster
	case Assertion:
		return v.Cluster
	}
	return ""
}
