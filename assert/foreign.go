package assert

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// A worker's Workload or job object is MultiKueue's remote copy only if it
// carried the kueue.x-k8s.io/multikueue-origin label when first seen
// (observe.FromMultiKueue); one that merely shares the namespace and name of
// a manager object is foreign. No per-workload assertion takes a foreign
// object for a copy (incarnation drops them); ExactlyOnceAdmitted says so
// when a foreign object sits on the selected worker; ForeignUntouched checks
// that MultiKueue leaves them alone.

// ForeignGrace is how long after a manager object's deletion a change to a
// same-named foreign object on a worker still counts against MultiKueue: it
// removes the remote objects of a deleted Workload from a cache, after the
// manager object is gone.
const ForeignGrace = 10 * time.Second

type objLife struct {
	cluster string
	uid     types.UID
}

// foreignLives returns the worker objects (cluster and UID) in events whose
// first recorded event lacked the MultiKueue origin label.
func foreignLives(events []observe.Event, manager string) map[objLife]bool {
	seen := map[objLife]bool{}
	out := map[objLife]bool{}
	for _, e := range events {
		if e.Cluster == manager || e.UID == "" {
			continue
		}
		k := objLife{e.Cluster, e.UID}
		if seen[k] {
			continue
		}
		seen[k] = true
		if !observe.FromMultiKueue(e.Labels) {
			out[k] = true
		}
	}
	return out
}

// dropForeign returns events without those of foreign worker objects.
func dropForeign(events []observe.Event, manager string) []observe.Event {
	foreign := foreignLives(events, manager)
	if len(foreign) == 0 {
		return events
	}
	out := make([]observe.Event, 0, len(events))
	for _, e := range events {
		if !foreign[objLife{e.Cluster, e.UID}] {
			out = append(out, e)
		}
	}
	return out
}

// onlyForeign returns the events of foreign worker objects, each Detail
// marked so that a timeline tells them from copies.
func onlyForeign(events []observe.Event, manager string) []observe.Event {
	foreign := foreignLives(events, manager)
	var out []observe.Event
	for _, e := range events {
		if foreign[objLife{e.Cluster, e.UID}] {
			if e.Detail == "" {
				e.Detail = "(not MultiKueue's)"
			} else {
				e.Detail += " (not MultiKueue's)"
			}
			out = append(out, e)
		}
	}
	return out
}

// foreignJobs returns the events of the foreign job objects that share t's
// job name on the workers and were still there at after (zero: any).
func (c *Checker) foreignJobs(t target, after time.Time) []observe.Event {
	if t.job == "" {
		return nil
	}
	evs, _ := c.Obs.History(t.jobKind, t.namespace, t.job)
	foreign := onlyForeign(evs, c.Topo.Manager.Name)
	gone := map[objLife]bool{}
	for _, s := range spans(foreign) {
		if !s.deleted.IsZero() && s.deleted.Before(after) {
			gone[objLife{s.cluster, s.uid}] = true
		}
	}
	out := foreign[:0]
	for _, e := range foreign {
		if !gone[objLife{e.Cluster, e.UID}] {
			out = append(out, e)
		}
	}
	return out
}

// span is one object's life on one cluster, as recorded.
type span struct {
	cluster         string
	uid             types.UID
	created         time.Time // first event
	deleted         time.Time // zero while it exists
	deleteRequested bool
}

func spans(events []observe.Event) []span {
	var out []span
	idx := map[objLife]int{}
	for _, e := range events {
		k := objLife{e.Cluster, e.UID}
		i, ok := idx[k]
		if !ok {
			out = append(out, span{cluster: e.Cluster, uid: e.UID, created: e.Time})
			i = len(out) - 1
			idx[k] = i
		}
		switch e.Type {
		case observe.Deleted:
			out[i].deleted = e.Time
		case observe.DeletionRequested:
			out[i].deleteRequested = true
		}
	}
	return out
}

// foreignOnWinner returns a problem when the cycle's worker got no copy of
// the job object while a foreign one of that name was there: MultiKueue finds
// the name taken and never creates its copy (kubernetes-sigs/kueue#12404), so
// the workload "runs" as someone else's job.
func (c *Checker) foreignOnWinner(t target, i int, cy cycle, copies, foreign []observe.Event, t0 time.Time) string {
	for _, e := range copies {
		if e.Type == observe.Created && e.Cluster == cy.cluster && cy.contains(e.Time, c.skew()) {
			return ""
		}
	}
	for _, s := range spans(foreign) {
		if s.cluster != cy.cluster || (!cy.end.IsZero() && !s.created.Before(cy.end)) || (!s.deleted.IsZero() && s.deleted.Before(cy.start)) {
			continue
		}
		return fmt.Sprintf("cluster %q: cycle %d: the job object %s on the selected worker is not MultiKueue's (no %s label; UID %s, seen since %s); MultiKueue could not create its copy",
			cy.cluster, i+1, t.jobRef(), observe.LabelOrigin, s.uid, rel(s.created, t0))
	}
	return ""
}

// foreignPresent reports whether a foreign job object of t's name exists on
// cluster now, not being deleted: MultiKueue will not create its copy there.
func (c *Checker) foreignPresent(t target, cluster string) bool {
	for _, s := range spans(c.foreignJobs(t, time.Time{})) {
		if s.cluster == cluster && s.deleted.IsZero() && !s.deleteRequested {
			return true
		}
	}
	return false
}

// ForeignUntouched checks, over the whole recorded history, that MultiKueue
// did not delete or modify a worker's Workload or job object that it did not
// create: for every object a worker had without the
// kueue.x-k8s.io/multikueue-origin label when first seen, no deletion, no
// deletion request (finalizers pending) and no spec or label change
// (observe.Modified) while the manager had an object of the same kind,
// namespace and name (from its creation, less DefaultSkew, until ForeignGrace
// after its deletion). Each problem names the cluster, the object and when.
// Violations before Checker.Since are not counted.
//
// It does not wait: call it once the workloads of interest are done. When
// the API servers keep audit logs (the local topology does) each problem
// names who made the change, and changes made by the test itself, a
// cluster's own Kueue or the local agent are not counted; without audit logs
// it judges by name and time alone, so a test that itself deletes or edits a
// worker's object of a manager object's name in that window is blamed too. A spec change that flips suspend is not counted (the worker's
// own Kueue suspends and unsuspends its Jobs; observe.Modified leaves it out).
// It does not check objects other than Workloads and the job kinds the
// Observer watches.
//
// A destructive write that the worker's API server refused counts too, with
// who refused it: with the guard (connect.InstallGuard) MultiKueue's
// deletion of a worker's own Job changes nothing, yet it was tried. Refused
// writes are read from audit sources that keep them
// (topology.RefusalSource; the local topology's do).
func (c *Checker) ForeignUntouched(ctx context.Context) error {
	mgr := c.Topo.Manager.Name
	var found []touch
	var attempts []attempt
	var story []observe.Event
	refusals := c.workerRefusals(ctx)
	for _, kind := range append([]observe.Kind{observe.KindWorkload}, c.Obs.JobKinds()...) {
		for _, key := range c.Obs.Objects(kind) {
			evs, _ := c.Obs.History(kind, key.Namespace, key.Name)
			touched := foreignTouched(evs, mgr, c.Since, c.skew())
			tried := c.refusedTouches(refusals, kind, key.Namespace, key.Name, evs)
			if len(touched) == 0 && len(tried) == 0 {
				continue
			}
			found = append(found, touched...)
			attempts = append(attempts, tried...)
			story = append(story, dropForeign(evs, mgr)...)
			story = append(story, onlyForeign(evs, mgr)...)
		}
	}
	found = c.attributeTouches(ctx, found)
	if len(found) == 0 && len(attempts) == 0 {
		return nil
	}
	t0 := firstTime(story) // the timeline's origin
	problems := make([]string, 0, len(found)+len(attempts))
	for _, f := range found {
		problems = append(problems, f.String(t0))
	}
	if len(attempts) > 0 {
		ids := map[[2]string]bool{}
		for _, id := range c.multiKueueIdentities(ctx) {
			ids[[2]string{id.Cluster, id.User}] = true
		}
		for _, a := range attempts {
			problems = append(problems, a.String(t0, ids[[2]string{a.cluster, a.write.User}]))
		}
	}
	return c.fail(ctx, &Failure{
		Assertion: "ForeignUntouched",
		Object:    "Workloads and job objects on every worker that MultiKueue did not create",
		Expected:  "MultiKueue neither deletes nor modifies (nor tries to) a worker's object that lacks the " + observe.LabelOrigin + " label, even when a manager object has its name",
		Problems:  problems,
		Timeline:  c.timeline(story),
	})
}

// touch is one change to a foreign object while a manager object of its
// name existed.
type touch struct {
	event     observe.Event
	firstSeen time.Time
	manager   span
}

func (f touch) String(t0 time.Time) string {
	e := f.event
	var what string
	switch e.Type {
	case observe.Deleted:
		what = "was deleted"
	case observe.DeletionRequested:
		what = "had its deletion requested (finalizers pending)"
	default:
		what = "had its " + e.Detail + " changed"
	}
	mgrState := "existed (created at " + rel(f.manager.created, t0) + ")"
	if !f.manager.deleted.IsZero() && e.Time.After(f.manager.deleted) {
		mgrState = "had just been deleted (at " + rel(f.manager.deleted, t0) + ")"
	}
	return fmt.Sprintf("cluster %q: %s %s/%s (UID %s, first seen at %s without the %s label) %s at %s while the manager's %s of that name %s; %s",
		e.Cluster, e.Kind, e.Namespace, e.Name, e.UID, rel(f.firstSeen, t0), observe.LabelOrigin, what, rel(e.Time, t0), e.Kind, mgrState, actorOf(e))
}

// attempt is a write to a foreign object, while a manager object of its
// name existed, that the worker's API server refused (the guard, RBAC, a
// webhook): it changed nothing, so only the audit log knows it.
// Repeated refusals of the same write (Kueue retries with back-off) are
// one attempt: times counts them, last is the latest.
type attempt struct {
	cluster   string
	kind      observe.Kind
	uid       types.UID
	firstSeen time.Time
	write     topology.AuditWrite
	times     int
	last      time.Time
}

func (a attempt) String(t0 time.Time, multiKueue bool) string {
	w := a.write
	who := w.User
	if multiKueue {
		who = "MultiKueue (" + w.User + ")"
	}
	when := "at " + rel(w.Received, t0)
	if a.times > 1 {
		when = fmt.Sprintf("%d times, from %s to %s,", a.times, rel(w.Received, t0), rel(a.last, t0))
	}
	return fmt.Sprintf("cluster %q: %s tried to %s %s %s/%s (UID %s, first seen at %s without the %s label) %s while the manager's %s of that name existed; refused by %s: %s",
		a.cluster, who, w.Verb, a.kind, w.Namespace, w.Name, a.uid, rel(a.firstSeen, t0), observe.LabelOrigin, when, a.kind, w.RefusedBy, w.Message)
}

// workerRefusals reads each worker's refused writes (observe.Observer.Refused)
// since Checker.Since; a worker without them is left out.
func (c *Checker) workerRefusals(ctx context.Context) map[string][]topology.AuditWrite {
	out := map[string][]topology.AuditWrite{}
	for _, w := range c.Topo.Workers {
		if ws, ok, _ := c.Obs.Refused(ctx, w.Name, c.Since); ok {
			out[w.Name] = ws
		}
	}
	return out
}

// refusedTouches finds, among the workers' refused writes, the updates,
// patches and deletes of a foreign object of kind namespace/name made while
// it lived and a manager object of its name existed, by someone not known to
// be the test, a cluster's own Kueue or the local agent.
func (c *Checker) refusedTouches(refusals map[string][]topology.AuditWrite, kind observe.Kind, namespace, name string, events []observe.Event) []attempt {
	if len(refusals) == 0 {
		return nil
	}
	mgr := c.Topo.Manager.Name
	foreign := foreignLives(events, mgr)
	if len(foreign) == 0 {
		return nil
	}
	res, err := observe.ResourceOf(kind)
	if err != nil {
		return nil
	}
	var lives, managerLives []span
	for _, s := range spans(events) {
		switch {
		case s.cluster == mgr:
			managerLives = append(managerLives, s)
		case foreign[objLife{s.cluster, s.uid}]:
			lives = append(lives, s)
		}
	}
	var out []attempt
	for _, l := range lives {
		for _, w := range refusals[l.cluster] {
			if w.Resource != res || w.Namespace != namespace || w.Name != name || w.Subresource != "" {
				continue
			}
			switch w.Verb {
			case "update", "patch", "delete":
			default:
				continue
			}
			switch w.Role {
			case topology.WriterTest, topology.WriterKueue, topology.WriterAgent:
				continue
			}
			if w.Received.Before(l.created.Add(-c.skew())) || (!l.deleted.IsZero() && w.Received.After(l.deleted)) {
				continue
			}
			for _, m := range managerLives {
				if !w.Received.Before(m.created.Add(-c.skew())) && (m.deleted.IsZero() || !w.Received.After(m.deleted.Add(ForeignGrace))) {
					out = addAttempt(out, attempt{cluster: l.cluster, kind: kind, uid: l.uid, firstSeen: l.created, write: w, times: 1, last: w.Received})
					break
				}
			}
		}
	}
	return out
}

// addAttempt adds a to out, folding it into an earlier attempt of the same
// write refused the same way.
func addAttempt(out []attempt, a attempt) []attempt {
	for i, b := range out {
		if b.cluster == a.cluster && b.uid == a.uid && b.write.Verb == a.write.Verb && b.write.User == a.write.User && b.write.RefusedBy == a.write.RefusedBy {
			out[i].times++
			out[i].last = a.write.Received
			return out
		}
	}
	return append(out, a)
}

// foreignTouched judges the history of one kind/namespace/name (every
// cluster) for ForeignUntouched.
func foreignTouched(events []observe.Event, manager string, since time.Time, skew time.Duration) []touch {
	foreign := foreignLives(events, manager)
	if len(foreign) == 0 {
		return nil
	}
	var managerLives []span
	for _, s := range spans(events) {
		if s.cluster == manager {
			managerLives = append(managerLives, s)
		}
	}
	during := func(at time.Time) (span, bool) {
		for _, m := range managerLives {
			if !at.Before(m.created.Add(-skew)) && (m.deleted.IsZero() || !at.After(m.deleted.Add(ForeignGrace))) {
				return m, true
			}
		}
		return span{}, false
	}
	firstSeen := map[objLife]time.Time{}
	var out []touch
	for _, e := range events {
		k := objLife{e.Cluster, e.UID}
		if !foreign[k] {
			continue
		}
		if _, ok := firstSeen[k]; !ok {
			firstSeen[k] = e.Time
		}
		switch e.Type {
		case observe.Deleted, observe.DeletionRequested, observe.Modified:
		default:
			continue
		}
		if e.Time.Before(since) {
			continue
		}
		if m, ok := during(e.Time); ok {
			out = append(out, touch{event: e, firstSeen: firstSeen[k], manager: m})
		}
	}
	return out
}

// attributeTouchTimeout bounds the audit-log read that names who made the
// changes.
const attributeTouchTimeout = 15 * time.Second

// attributeTouches names who made each change when the API servers keep
// audit logs (observe.Observer.Attribute), and drops the changes made by
// someone known not to be MultiKueue: the test itself, a cluster's own Kueue,
// the local agent. Unknown actors stay blamed.
func (c *Checker) attributeTouches(ctx context.Context, found []touch) []touch {
	if len(found) == 0 || !c.Obs.HasAudit() {
		return found
	}
	evs := make([]observe.Event, len(found))
	for i, f := range found {
		evs[i] = f.event
	}
	actx, cancel := context.WithTimeout(ctx, attributeTouchTimeout)
	defer cancel()
	attributed, _ := c.Obs.Attribute(actx, evs) // unread logs leave actors unknown
	var out []touch
	for i, f := range found {
		f.event = attributed[i]
		switch f.event.Actor.Role {
		case topology.WriterTest, topology.WriterKueue, topology.WriterAgent:
			continue
		}
		out = append(out, f)
	}
	return out
}

// actorOf says who made the change, as far as the history knows.
func actorOf(e observe.Event) string {
	if e.Actor.IsZero() {
		return "who did it is unknown (no audit record attributed)"
	}
	return "by " + e.Actor.Describe(e.Cluster)
}

// ForeignUntouched reports Checker.ForeignUntouched.
func (a *Asserter) ForeignUntouched(ctx context.Context) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.ForeignUntouched(ctx))
}
