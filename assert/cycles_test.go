package assert

import (
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
)

func at(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }

func TestCyclesOf(t *testing.T) {
	ev := func(ms int, typ observe.Type, v ...string) observe.Event {
		return observe.Event{Time: at(ms), Cluster: "m", Kind: observe.KindWorkload, Type: typ, Values: v}
	}
	events := []observe.Event{
		ev(0, observe.Created),
		ev(10, observe.ClusterNameSet, "w1"),
		ev(20, observe.Evicted),
		ev(25, observe.ClusterNameSet, ""),
		ev(30, observe.ClusterNameSet, "w2"),
		ev(40, observe.ClusterNameSet, "w3"), // a change without reset
		{Time: at(45), Cluster: "w1", Kind: observe.KindWorkload, Type: observe.ClusterNameSet, Values: []string{"x"}},
	}
	cycles, problems := cyclesOf(events, "m")
	if len(cycles) != 3 || cycles[0].cluster != "w1" || !cycles[0].end.Equal(at(20)) ||
		cycles[1].cluster != "w2" || !cycles[1].end.Equal(at(40)) || cycles[2].cluster != "w3" || !cycles[2].end.IsZero() {
		t.Fatalf("cycles %+v", cycles)
	}
	if len(problems) != 1 {
		t.Fatalf("problems %v", problems)
	}
	jobs := []observe.Event{{Time: at(35), Cluster: "w3", Type: observe.Created}}
	anchorCycles(cycles, jobs)
	if !cycles[2].start.Equal(at(40)) {
		t.Fatalf("a job created before the previous cycle ended moved the anchor: %v", cycles[2].start)
	}
	jobs = []observe.Event{{Time: at(5), Cluster: "w1", Type: observe.Created}}
	anchorCycles(cycles, jobs)
	if !cycles[0].start.Equal(at(5)) {
		t.Fatalf("remote job creation did not anchor the cycle: %v", cycles[0].start)
	}
	// A remote job created and deleted again before the selection (dispatch
	// during an eviction) does not anchor the cycle; a later one does.
	cycles[0].start = at(10)
	jobs = []observe.Event{
		{Time: at(3), Cluster: "w1", UID: "a", Type: observe.Created},
		{Time: at(6), Cluster: "w1", UID: "a", Type: observe.Deleted},
	}
	anchorCycles(cycles, jobs)
	if !cycles[0].start.Equal(at(10)) {
		t.Fatalf("a remote job deleted before the selection anchored the cycle: %v", cycles[0].start)
	}
	jobs = append(jobs, observe.Event{Time: at(8), Cluster: "w1", UID: "b", Type: observe.Created})
	anchorCycles(cycles, jobs)
	if !cycles[0].start.Equal(at(8)) {
		t.Fatalf("the remote job alive at selection did not anchor the cycle: %v", cycles[0].start)
	}
}
