package assert_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/assert"
)

// logging is a TB with Logf.
type logging struct{ errs, logs []string }

func (l *logging) Errorf(format string, args ...any) {
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}
func (l *logging) Logf(format string, args ...any) {
	l.logs = append(l.logs, fmt.Sprintf(format, args...))
}

// TestReporterLogsALimitationAndReportsAFailure: a Limitation is logged
// and counts as no failure; anything else (a Limitation joined with a
// failure included) fails.
func TestReporterLogsALimitationAndReportsAFailure(t *testing.T) {
	lim := &assert.Limitation{Assertion: "StatusSynced", Object: "StatefulSet default/s", Why: "no status sync", Seen: []string{`cluster "worker-1": ready=2`}}
	if !assert.IsLimitation(lim) || assert.IsLimitation(errors.New("x")) || assert.IsLimitation(nil) {
		t.Fatal("IsLimitation misreads")
	}
	joined := errors.Join(lim, errors.New("ExactlyOnceAdmitted failed"))
	if assert.IsLimitation(joined) {
		t.Fatal("a Limitation joined with a failure read as a Limitation alone")
	}
	rec := &logging{}
	r := assert.ReporterFor(rec)
	if !r.Report(lim) || len(rec.errs) != 0 || len(rec.logs) != 1 {
		t.Fatalf("a Limitation: errs %q, logs %q", rec.errs, rec.logs)
	}
	for _, want := range []string{"StatusSynced not judged for StatefulSet default/s", "documented MultiKueue limitation", "no status sync", `seen: cluster "worker-1": ready=2`} {
		if !strings.Contains(rec.logs[0], want) {
			t.Errorf("the log lacks %q: %s", want, rec.logs[0])
		}
	}
	if r.Report(joined) || len(rec.errs) != 1 {
		t.Fatalf("a failure joined to a Limitation was not reported: %q", rec.errs)
	}
	quiet := &errorfOnly{}
	if !assert.ReporterFor(quiet).Report(lim) || len(quiet.msgs) != 0 {
		t.Fatalf("an Errorf-only TB failed on a Limitation: %q", quiet.msgs)
	}
}
