package assert

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/multikueue-testkit/testkit/observe"
)

// Limitation is what an assertion returns instead of a failure when Kueue
// documents that MultiKueue does not do what the assertion checks for the
// object's kind: it does not copy a StatefulSet's or a LeaderWorkerSet's
// status to the manager (observe.StatusNotCopied), and neither kind ever
// finishes (observe.NeverFinishes). It is an error, so that a caller who checks
// only for nil learns that nothing was judged; the Asserter and the
// scenario Runner log it (with the TB's Logf, when it has one) instead of
// failing the test. IsLimitation tells it from a failure.
type Limitation struct {
	Assertion string
	// Object names the job object.
	Object string
	// Why is Kueue's reason, with where it is in Kueue's code.
	Why string
	// Seen is what the clusters showed instead, one line each.
	Seen []string
}

func (l *Limitation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s not judged for %s: a documented MultiKueue limitation: %s", l.Assertion, l.Object, l.Why)
	for _, s := range l.Seen {
		b.WriteString("\n  seen: " + s)
	}
	return b.String()
}

// IsLimitation reports whether err is a Limitation (and nothing else).
func IsLimitation(err error) bool {
	var l *Limitation
	return errors.As(err, &l) && error(l) == err
}

// statusNotCopied is StatusSynced for a kind whose status MultiKueue does
// not copy: it judges what Kueue does promise (the copy on the worker the
// manager chose runs: every replica it asks for ready) and returns a
// Limitation naming both sides' status, or a Failure when the copy never
// ran.
func (c *Checker) statusNotCopied(ctx context.Context, t target, why string) error {
	mgr := c.Topo.Manager.Name
	var remote string
	err := pollHistory(ctx, c, t, fmt.Sprintf("the remote %s to have every replica ready", t.jobKind), func() error {
		last, jobs, err := c.lastPlacement(t)
		if err != nil {
			return err
		}
		remote = last.cluster
		if !hasEvent(jobs, remote, observe.JobStarted) {
			return fmt.Errorf("the remote %s on %q does not have every replica ready", t.jobKind, remote)
		}
		return nil
	})
	wl, jobs := c.history(t)
	if err != nil {
		return c.fail(ctx, &Failure{Assertion: "StatusSynced", Object: t.String(),
			Expected: fmt.Sprintf("the %s's copy on the chosen worker to run (its status is not copied to the manager: %s)", t.jobKind, why),
			Problems: c.waited(ctx, t, err), Timeline: c.timeline(wl, jobs)}, t.refs(c)...)
	}
	seen := []string{}
	for _, cl := range []string{remote, mgr} {
		if s := lastDetail(jobs, cl, observe.JobStatus); s != "" {
			seen = append(seen, fmt.Sprintf("cluster %q: %s %s", cl, t.jobRef(), s))
		} else {
			seen = append(seen, fmt.Sprintf("cluster %q: %s: no status recorded", cl, t.jobRef()))
		}
	}
	return &Limitation{Assertion: "StatusSynced", Object: t.jobRef(), Why: why, Seen: seen}
}

// lastDetail is the detail of the last event of type typ on cluster.
func lastDetail(events []observe.Event, cluster string, typ observe.Type) string {
	out := ""
	for _, e := range events {
		if e.Cluster == cluster && e.Type == typ {
			out = e.Detail
		}
	}
	return out
}
