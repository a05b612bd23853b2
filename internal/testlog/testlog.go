// Package testlog sends a topology's progress lines to a test's log: the
// one helper every package's tests need to watch a slow setup step.
package testlog

import (
	"io"
	"strings"
	"testing"
)

// Writer returns an io.Writer that logs each write, without its trailing
// newline, with t.Log (topology.Options.Progress, install options'
// Progress).
func Writer(t testing.TB) io.Writer { return writer{t} }

type writer struct{ t testing.TB }

func (w writer) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
