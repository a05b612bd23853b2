package assert

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/multikueue-testkit/testkit/observe"
)

func foreignEv(ms int, cluster, uid string, typ observe.Type, copyOf string) observe.Event {
	e := observe.Event{Time: at(ms), Cluster: cluster, Kind: observe.KindJob, Namespace: "default", Name: "h3", UID: types.UID(uid), Type: typ}
	if copyOf != "" {
		e.Labels = map[string]string{observe.LabelOrigin: "multikueue", observe.LabelPrebuiltWorkload: copyOf}
	}
	return e
}

// The user's story: worker-3 had its own Job default/h3; a manager Job of
// that name was created, and the worker's Job was deleted 100 ms later.
func TestForeignTouchedNamesTheDeletion(t *testing.T) {
	evs := []observe.Event{
		foreignEv(0, "worker-3", "own", observe.Created, ""),
		foreignEv(1000, "manager", "mgr", observe.Created, ""),
		foreignEv(1100, "worker-3", "own", observe.Deleted, ""),
		foreignEv(2000, "worker-1", "copy", observe.Created, "job-h3-1"),
		foreignEv(3000, "worker-1", "copy", observe.Deleted, "job-h3-1"), // MultiKueue's own: its business
	}
	got := foreignTouched(evs, "manager", time.Time{}, DefaultSkew)
	if len(got) != 1 {
		t.Fatalf("want one problem, got %+v", got)
	}
	msg := got[0].String(at(0))
	for _, want := range []string{`cluster "worker-3": Job default/h3`, "UID own", "first seen at +0s without the kueue.x-k8s.io/multikueue-origin label", "was deleted at +1.1s", "while the manager's Job of that name existed (created at +1s)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if got := foreignTouched(evs, "manager", at(1200), DefaultSkew); len(got) != 0 {
		t.Errorf("a deletion before Since counted: %+v", got)
	}
}

func TestForeignTouchedWindow(t *testing.T) {
	for _, c := range []struct {
		name string
		evs  []observe.Event
		want int
	}{
		{"deleted before the manager Job existed", []observe.Event{
			foreignEv(0, "worker-1", "own", observe.Created, ""),
			foreignEv(500, "worker-1", "own", observe.Deleted, ""),
			foreignEv(1000, "manager", "mgr", observe.Created, ""),
		}, 0},
		{"deleted long after the manager Job went", []observe.Event{
			foreignEv(0, "worker-1", "own", observe.Created, ""),
			foreignEv(1000, "manager", "mgr", observe.Created, ""),
			foreignEv(2000, "manager", "mgr", observe.Deleted, ""),
			foreignEv(2000+int(ForeignGrace/time.Millisecond)+1000, "worker-1", "own", observe.Deleted, ""),
		}, 0},
		{"deleted just after the manager Job went", []observe.Event{
			foreignEv(0, "worker-1", "own", observe.Created, ""),
			foreignEv(1000, "manager", "mgr", observe.Created, ""),
			foreignEv(2000, "manager", "mgr", observe.Deleted, ""),
			foreignEv(2100, "worker-1", "own", observe.Deleted, ""),
		}, 1},
		{"modified and deletion requested", []observe.Event{
			foreignEv(0, "worker-1", "own", observe.Created, ""),
			foreignEv(1000, "manager", "mgr", observe.Created, ""),
			{Time: at(1100), Cluster: "worker-1", Kind: observe.KindJob, UID: "own", Type: observe.Modified, Detail: "labels"},
			foreignEv(1200, "worker-1", "own", observe.DeletionRequested, ""),
		}, 2},
		{"status changes are not modifications", []observe.Event{
			foreignEv(0, "worker-1", "own", observe.Created, ""),
			foreignEv(1000, "manager", "mgr", observe.Created, ""),
			foreignEv(1100, "worker-1", "own", observe.JobStarted, ""),
			foreignEv(1200, "worker-1", "own", observe.JobSucceeded, ""),
		}, 0},
	} {
		if got := foreignTouched(c.evs, "manager", time.Time{}, DefaultSkew); len(got) != c.want {
			t.Errorf("%s: %d problems, want %d: %+v", c.name, len(got), c.want, got)
		}
	}
}

// A foreign Job on the selected worker, and no copy there: the winner's job
// is not MultiKueue's. With a copy created in the cycle, nothing to say.
func TestForeignOnWinner(t *testing.T) {
	c := &Checker{}
	tg := target{namespace: "default", job: "h3", jobKind: observe.KindJob, workload: "job-h3-1"}
	cy := cycle{cluster: "worker-1", start: at(1000)}
	foreign := onlyForeign([]observe.Event{foreignEv(0, "worker-1", "own", observe.Created, "")}, "manager")
	p := c.foreignOnWinner(tg, 0, cy, nil, foreign, at(0))
	for _, want := range []string{`cluster "worker-1": cycle 1: the job object Job default/h3 on the selected worker is not MultiKueue's`, "no kueue.x-k8s.io/multikueue-origin label", "MultiKueue could not create its copy"} {
		if !strings.Contains(p, want) {
			t.Errorf("%q lacks %q", p, want)
		}
	}
	copies := []observe.Event{foreignEv(1100, "worker-1", "copy", observe.Created, "job-h3-1")}
	if p := c.foreignOnWinner(tg, 0, cy, copies, foreign, at(0)); p != "" {
		t.Errorf("a copy was created, yet: %s", p)
	}
	// Gone before the cycle started: not in the way.
	gone := onlyForeign([]observe.Event{foreignEv(0, "worker-1", "own", observe.Created, ""), foreignEv(500, "worker-1", "own", observe.Deleted, "")}, "manager")
	if p := c.foreignOnWinner(tg, 0, cy, nil, gone, at(0)); p != "" {
		t.Errorf("a foreign Job deleted before the cycle, yet: %s", p)
	}
	if !strings.Contains(foreign[0].Detail, "not MultiKueue's") {
		t.Errorf("foreign events are not marked for the timeline: %+v", foreign[0])
	}
}
