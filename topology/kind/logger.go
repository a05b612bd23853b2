package kind

import (
	"fmt"
	"io"
	"strings"

	kindlog "sigs.k8s.io/kind/pkg/log"

	"github.com/multikueue-testkit/testkit/internal/redact"
)

// progressLogger is kind's logger, writing kind's user-facing messages
// (verbosity 0, warnings, errors) as one progress line each, prefixed with
// the kind cluster's name. Lines pass through redaction.
type progressLogger struct {
	w      io.Writer
	prefix string
}

var _ kindlog.Logger = progressLogger{}

// newLogger prefixes kind's lines with the cluster's name, or with "kind: "
// alone when kindName is empty (cluster-wide calls such as List).
func newLogger(w io.Writer, kindName string) progressLogger {
	if kindName == "" {
		return progressLogger{w: w, prefix: "kind: "}
	}
	return progressLogger{w: w, prefix: fmt.Sprintf("kind: cluster %q: ", kindName)}
}

func (l progressLogger) line(s string) {
	for _, ln := range strings.Split(strings.TrimSpace(s), "\n") {
		if ln = strings.TrimSpace(ln); ln != "" {
			fmt.Fprintln(l.w, l.prefix+redact.String(ln))
		}
	}
}

func (l progressLogger) Warn(m string)                        { l.line("warning: " + m) }
func (l progressLogger) Warnf(f string, a ...any)             { l.line("warning: " + fmt.Sprintf(f, a...)) }
func (l progressLogger) Error(m string)                       { l.line("error: " + m) }
func (l progressLogger) Errorf(f string, a ...any)            { l.line("error: " + fmt.Sprintf(f, a...)) }
func (l progressLogger) V(v kindlog.Level) kindlog.InfoLogger { return infoLogger{l: l, on: v <= 0} }

type infoLogger struct {
	l  progressLogger
	on bool
}

func (i infoLogger) Info(m string) {
	if i.on {
		i.l.line(m)
	}
}

func (i infoLogger) Infof(f string, a ...any) {
	if i.on {
		i.l.line(fmt.Sprintf(f, a...))
	}
}

func (i infoLogger) Enabled() bool { return i.on }
