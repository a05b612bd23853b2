package assert

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/multikueue-testkit/testkit/observe"
)

// incarnation narrows the recorded history of a name to one life of the
// manager objects: a test that deletes a Job and creates it again under the
// same name must not be judged on the first one's events.
//
// On the manager it keeps the events of the given UIDs (an empty UID keeps
// every event). On the workers it drops the remote objects of an earlier
// life: created before this life began and deleted before this life was
// placed on a worker (both with the skew allowance). A remote object of an
// earlier life still there at the placement is kept: MultiKueue could adopt
// it, which the assertions must report.
//
// Foreign worker objects (without the MultiKueue origin label, see
// foreign.go) are no life of the workload at all: they are dropped first.
type incarnation struct {
	manager     string
	workloadUID types.UID
	jobUID      types.UID
	skew        time.Duration
}

func (in incarnation) filter(wl, jobs []observe.Event) ([]observe.Event, []observe.Event) {
	wl, jobs = dropForeign(wl, in.manager), dropForeign(jobs, in.manager)
	start := in.start(wl, jobs)
	placed := in.placed(wl, start)
	return in.keep(wl, in.workloadUID, start, placed), in.keep(jobs, in.jobUID, start, placed)
}

// start is when this life began on the manager: the later creation of the
// job and of the Workload (Kueue may re-create a Workload, under the same
// name, for the same job). Zero when neither was observed.
func (in incarnation) start(wl, jobs []observe.Event) time.Time {
	var start time.Time
	for _, set := range []struct {
		events []observe.Event
		uid    types.UID
	}{{jobs, in.jobUID}, {wl, in.workloadUID}} {
		if set.uid == "" {
			continue
		}
		for _, e := range set.events {
			if e.Cluster == in.manager && e.UID == set.uid && e.Type == observe.Created && e.Time.After(start) {
				start = e.Time
			}
		}
	}
	return start
}

// placed is when this life first got a clusterName; zero if not yet.
func (in incarnation) placed(wl []observe.Event, start time.Time) time.Time {
	for _, e := range wl {
		if e.Cluster == in.manager && e.ClusterName() != "" &&
			!e.Time.Before(start) && (in.workloadUID == "" || e.UID == "" || e.UID == in.workloadUID) {
			return e.Time
		}
	}
	return time.Time{}
}

func (in incarnation) keep(events []observe.Event, managerUID types.UID, start, placed time.Time) []observe.Event {
	type life struct{ created, deleted time.Time }
	lives := map[types.UID]*life{}
	for _, e := range events {
		if e.Cluster == in.manager || e.UID == "" {
			continue
		}
		l := lives[e.UID]
		if l == nil {
			l = &life{}
			lives[e.UID] = l
		}
		switch e.Type {
		case observe.Created:
			l.created = e.Time
		case observe.Deleted:
			l.deleted = e.Time
		}
	}
	earlier := func(uid types.UID) bool {
		l := lives[uid]
		if l == nil || start.IsZero() || l.created.IsZero() || !l.created.Before(start.Add(-in.skew)) || l.deleted.IsZero() {
			return false
		}
		return placed.IsZero() || l.deleted.Before(placed.Add(in.skew))
	}
	out := make([]observe.Event, 0, len(events))
	for _, e := range events {
		switch {
		case e.Cluster == in.manager:
			if managerUID != "" && e.UID != "" && e.UID != managerUID {
				continue
			}
		case earlier(e.UID):
			continue
		}
		out = append(out, e)
	}
	return out
}
