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
// every event). On the workers it drops the remote objects that belong to an
// earlier life: created before this one began and either gone by then or
// labelled for another Workload. A remote object created later is always
// kept, so a wrong label on it is still reported.
type incarnation struct {
	manager     string
	workloadUID types.UID
	jobUID      types.UID
	workload    string
	skew        time.Duration
}

func (in incarnation) filter(wl, jobs []observe.Event) ([]observe.Event, []observe.Event) {
	start := in.start(wl, jobs)
	return in.keep(wl, in.workloadUID, start), in.keep(jobs, in.jobUID, start)
}

// start is when this life began on the manager: the creation of the job,
// else of the Workload. Zero when neither was observed.
func (in incarnation) start(wl, jobs []observe.Event) time.Time {
	for _, set := range []struct {
		events []observe.Event
		uid    types.UID
	}{{jobs, in.jobUID}, {wl, in.workloadUID}} {
		if set.uid == "" {
			continue
		}
		for _, e := range set.events {
			if e.Cluster == in.manager && e.UID == set.uid && e.Type == observe.Created {
				return e.Time
			}
		}
	}
	return time.Time{}
}

func (in incarnation) keep(events []observe.Event, managerUID types.UID, start time.Time) []observe.Event {
	type life struct {
		created, deleted time.Time
		label            string
	}
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
		if v := e.Labels[observe.LabelPrebuiltWorkload]; v != "" {
			l.label = v
		}
	}
	earlier := func(uid types.UID) bool {
		l := lives[uid]
		if l == nil || start.IsZero() || l.created.IsZero() || !l.created.Before(start.Add(-in.skew)) {
			return false
		}
		goneBefore := !l.deleted.IsZero() && l.deleted.Before(start)
		otherWorkload := l.label != "" && l.label != in.workload
		return goneBefore || otherWorkload
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
