package assert

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/multikueue-testkit/testkit/observe"
)

func TestIncarnationKeepsOnlyTheCurrentLife(t *testing.T) {
	ev := func(ms int, cluster, uid string, typ observe.Type, prebuilt string) observe.Event {
		e := observe.Event{Time: at(ms), Cluster: cluster, Kind: observe.KindJob, UID: types.UID(uid), Type: typ}
		if prebuilt != "" {
			e.Labels = map[string]string{observe.LabelOrigin: "multikueue", observe.LabelPrebuiltWorkload: prebuilt}
		}
		return e
	}
	jobs := []observe.Event{
		ev(0, "m", "job-1", observe.Created, ""),
		ev(100, "w1", "remote-1", observe.Created, "wl-1"),
		ev(900, "m", "job-1", observe.Deleted, ""),
		ev(1000, "m", "job-2", observe.Created, ""),
		ev(1100, "w1", "remote-1", observe.Deleted, "wl-1"), // the old copy goes late
		ev(1200, "w2", "remote-2", observe.Created, "wl-2"),
		ev(1300, "w1", "stray", observe.Created, "wl-1"), // created in this life with a wrong label: kept
		ev(1400, "w2", "own", observe.Created, ""),       // the worker's own Job of that name: no life of the workload
	}
	in := incarnation{manager: "m", jobUID: "job-2"}
	_, got := in.filter(nil, jobs)
	var uids []string
	for _, e := range got {
		uids = append(uids, string(e.UID)+"/"+string(e.Type))
	}
	want := "job-2/Created remote-2/Created stray/Created"
	if s := strings.Join(uids, " "); s != want {
		t.Fatalf("kept %s, want %s", s, want)
	}

	// Without a known UID nothing is dropped but the foreign object.
	_, all := incarnation{manager: "m"}.filter(nil, jobs)
	if len(all) != len(jobs)-1 {
		t.Fatalf("kept %d of %d events without a UID to go by", len(all), len(jobs))
	}

	// An earlier life's copy still there when this life is placed is kept:
	// MultiKueue could adopt it.
	placed := []observe.Event{{Time: at(1050), Cluster: "m", Kind: observe.KindWorkload, Type: observe.ClusterNameSet, Values: []string{"w1"}}}
	_, got = in.filter(placed, jobs)
	uids = nil
	for _, e := range got {
		uids = append(uids, string(e.UID)+"/"+string(e.Type))
	}
	want = "remote-1/Created job-2/Created remote-1/Deleted remote-2/Created stray/Created"
	if s := strings.Join(uids, " "); s != want {
		t.Fatalf("with a placement before the old copy went, kept %s, want %s", s, want)
	}
}
