package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The validator must reject what the schema does not allow; real output is
// validated in TestScale.
func TestValidatorRejectsWhatTheSchemaForbids(t *testing.T) {
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	wl := Workload{Header: header(RecordWorkload, "w01", "worker-1"), Phase: PhaseLoad, Kind: "Job", Namespace: "default", Name: "a",
		Created: time.Now(), DispatchLatencyMS: msPtr(time.Second)}
	good, _ := json.Marshal(wl)
	if err := v.Line(good); err != nil {
		t.Fatalf("a well-formed workload record is refused: %v", err)
	}
	for name, mutate := range map[string]func(map[string]any){
		"wrong schema version":     func(m map[string]any) { m["schema"] = "multikueue-testkit/report/v0" },
		"unknown record type":      func(m map[string]any) { m["record"] = "pod" },
		"undocumented field":       func(m map[string]any) { m["latency"] = 3 },
		"missing cluster":          func(m map[string]any) { delete(m, "cluster") },
		"latency as a string":      func(m map[string]any) { m["dispatch_latency_ms"] = "1000" },
		"phase outside the enum":   func(m map[string]any) { m["phase"] = "warmup" },
		"created not a date-time":  func(m map[string]any) { m["created"] = "yesterday" },
		"negative loser count":     func(m map[string]any) { m["losers"] = -1 },
		"outcome outside the enum": func(m map[string]any) { m["outcome"] = "Complete" },
	} {
		var m map[string]any
		_ = json.Unmarshal(good, &m)
		mutate(m)
		bad, _ := json.Marshal(m)
		if err := v.Line(bad); err == nil {
			t.Errorf("%s: accepted %s", name, bad)
		}
	}
	n, err := v.Reader("x.jsonl", strings.NewReader(string(good)+"\n{}\n"))
	if n != 2 || err == nil || !strings.Contains(err.Error(), "x.jsonl:2") {
		t.Errorf("Reader: %d lines, error %v; want 2 lines and line 2 named", n, err)
	}
}
