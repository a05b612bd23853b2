package assert

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
)

// Failure is the error an assertion returns. Its message reads top to bottom:
// the assertion and object, what was expected, each problem found (each names
// its cluster), then the timeline of the object on every cluster.
type Failure struct {
	Assertion string
	// Object is what the assertion was about, e.g. `Workload default/job-a-1b2c3`.
	Object   string
	Expected string
	Problems []string
	// Timeline is observe.Timeline of the relevant events, if any.
	Timeline string
	// Artifacts is the directory the report, object dumps and logs were
	// written to, when Checker.Artifacts is set.
	Artifacts string
}

func (f *Failure) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s failed", f.Assertion)
	if f.Object != "" {
		fmt.Fprintf(&sb, " for %s", f.Object)
	}
	fmt.Fprintf(&sb, "\n  expected: %s\n  found:\n", f.Expected)
	for _, p := range f.Problems {
		fmt.Fprintf(&sb, "    - %s\n", p)
	}
	if f.Timeline != "" {
		sb.WriteString(f.Timeline)
	}
	if f.Artifacts != "" {
		fmt.Fprintf(&sb, "  artifacts: %s\n", f.Artifacts)
	}
	return redactText(sb.String())
}

// timeline renders events, with the pods of every job object among them
// (where each was bound, how it ran: Observer.PodHistory) from the first
// of the events on.
func (c *Checker) timeline(events ...[]observe.Event) string {
	var all []observe.Event
	for _, e := range events {
		all = append(all, e...)
	}
	all = append(all, c.podsOf(all)...)
	sortEvents(all)
	return observe.Timeline(c.attribute(all), c.Obs.Clusters())
}

// podsOf is the pod events of the job objects in events, none older than
// the first of events.
func (c *Checker) podsOf(events []observe.Event) []observe.Event {
	type job struct {
		kind            observe.Kind
		namespace, name string
	}
	seen := map[job]bool{}
	var first time.Time
	for _, e := range events {
		if first.IsZero() || e.Time.Before(first) {
			first = e.Time
		}
		if observe.IsJobKind(e.Kind) && e.Kind != observe.KindPod { // a pod's events are its own
			seen[job{e.Kind, e.Namespace, e.Name}] = true
		}
	}
	var out []observe.Event
	for j := range seen {
		for _, e := range c.Obs.PodHistory(j.kind, j.namespace, j.name) {
			if !e.Time.Before(first) {
				out = append(out, e)
			}
		}
	}
	return out
}

// attributeTimeout bounds what naming the actors of a timeline may take.
const attributeTimeout = 15 * time.Second

// attribute names who made each change (observe.Observer.Attribute) when the
// topology's API servers keep audit logs: the provider's own identities (the
// test, each cluster's Kueue, the local agent) and, on each worker, the user
// MultiKueue's credentials authenticate as. Without audit logs the events
// are returned as they are.
func (c *Checker) attribute(events []observe.Event) []observe.Event {
	if !c.Obs.HasAudit() {
		return events
	}
	ctx, cancel := context.WithTimeout(context.Background(), attributeTimeout)
	defer cancel()
	// An audit log that cannot be read leaves its cluster's lines as they
	// are; the others are still attributed.
	out, _ := c.Obs.Attribute(ctx, events, c.multiKueueIdentities(ctx)...)
	return out
}
