package assert

import (
	"slices"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
)

// TestFinalStatusIgnoresTheTeardown: the final status of a job on a cluster
// is the last one before its deletion was requested (an AppWrapper's
// controller writes phase=Terminating while MultiKueue deletes the remote
// copy, after the manager took the final status), and a new object of the
// name starts over.
func TestFinalStatusIgnoresTheTeardown(t *testing.T) {
	ev := eventsOnW(time.Second)
	jobs := []observe.Event{
		ev(0, observe.Created, ""), ev(1, observe.JobStatus, "phase=Running"),
		ev(2, observe.JobSucceeded, ""), ev(2, observe.JobStatus, "phase=Succeeded"),
		ev(3, observe.DeletionRequested, ""), ev(3, observe.JobStatus, "phase=Terminating"),
	}
	if f := finalOf(jobs, "w"); f.status != "phase=Succeeded" || f.typ != observe.JobSucceeded {
		t.Errorf("final = %+v, want phase=Succeeded, the status before the deletion request", f)
	}
	again := append(jobs, ev(5, observe.Created, ""), ev(6, observe.JobStatus, "phase=Running"))
	if f := finalOf(again, "w"); f.status != "phase=Running" {
		t.Errorf("after a new object of the name: final status %q, want phase=Running", f.status)
	}
}

// TestFinalStatusKeepsTheStatusAtTheEnd: a Kubeflow job's operator may count
// its last replica after the job succeeded; MultiKueue stops copying once the
// manager's Workload is Finished, so the status at the end is kept beside
// the last one (seen in CI: an XGBoostJob's worker counted succeeded 23 ms
// after the master, the manager kept "Worker(active=1 …)").
func TestFinalStatusKeepsTheStatusAtTheEnd(t *testing.T) {
	ev := eventsOnW(time.Millisecond)
	jobs := []observe.Event{
		ev(0, observe.Created, ""), ev(450, observe.JobStatus, "Master(active=1) Worker(active=1) terminal=none"),
		ev(1411, observe.JobSucceeded, ""), ev(1411, observe.JobStatus, "Master(succeeded=1) Worker(active=1) terminal=Succeeded"),
		ev(1434, observe.JobStatus, "Master(succeeded=1) Worker(succeeded=1) terminal=Succeeded"),
	}
	f := finalOf(jobs, "w")
	if f.atEnd != "Master(succeeded=1) Worker(active=1) terminal=Succeeded" || f.status != "Master(succeeded=1) Worker(succeeded=1) terminal=Succeeded" {
		t.Errorf("final = %+v, want the status at the end and the last one", f)
	}
}

// TestFinishedElsewhereNamesTheCopyTheManagerEndedFrom: the copy on the
// worker selected last was deleted unfinished while the manager's Job
// ended with the status of an earlier worker's copy (Kueue v0.19.2 after a
// disconnect: the cut-off worker's copy finished during the cut, and
// MultiKueue finished the manager's Workload from it); a copy that is still
// there, or a manager status no other copy had, is no such cause.
func TestFinishedElsewhereNamesTheCopyTheManagerEndedFrom(t *testing.T) {
	on := func(cluster string, n int, typ observe.Type, detail string) observe.Event {
		return observe.Event{Time: time.Unix(0, 0).Add(time.Duration(n) * time.Second), Cluster: cluster, Type: typ, Detail: detail}
	}
	jobs := []observe.Event{
		on("manager", 0, observe.Created, ""),
		on("w1", 1, observe.Created, ""), on("w1", 2, observe.JobStatus, "active=1"),
		on("w1", 12, observe.JobSucceeded, ""), on("w1", 12, observe.JobStatus, "succeeded=1"),
		on("w3", 25, observe.Created, ""), on("w3", 26, observe.JobStatus, "active=1"),
		on("manager", 33, observe.JobSucceeded, ""), on("manager", 33, observe.JobStatus, "succeeded=1"),
	}
	if got := finishedElsewhere(jobs, "manager", "w3"); got.cluster != "" {
		t.Errorf("with the selected copy still there: %+v, want none", got)
	}
	gone := append(slices.Clone(jobs), on("w3", 34, observe.DeletionRequested, ""), on("w3", 34, observe.Deleted, ""))
	got := finishedElsewhere(gone, "manager", "w3")
	if got.cluster != "w1" || got.final.typ != observe.JobSucceeded || !got.deleted.Equal(time.Unix(34, 0)) {
		t.Errorf("finishedElsewhere = %+v, want w1's copy, w3's deleted at 34 s", got)
	}
	other := slices.Clone(gone)
	other[8] = on("manager", 33, observe.JobStatus, "succeeded=2")
	if got := finishedElsewhere(other, "manager", "w3"); got.cluster != "" {
		t.Errorf("with a manager status no copy had: %+v, want none", got)
	}
}

// eventsOnW makes events on cluster "w", n units after the epoch.
func eventsOnW(unit time.Duration) func(n int, typ observe.Type, detail string) observe.Event {
	return func(n int, typ observe.Type, detail string) observe.Event {
		return observe.Event{Time: time.Unix(0, 0).Add(time.Duration(n) * unit), Cluster: "w", Type: typ, Detail: detail}
	}
}
