package assert

import (
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
	at := time.Unix(0, 0)
	ev := func(s int, typ observe.Type, detail string) observe.Event {
		return observe.Event{Time: at.Add(time.Duration(s) * time.Second), Cluster: "w", Type: typ, Detail: detail}
	}
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
