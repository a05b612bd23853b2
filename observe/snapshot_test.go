package observe

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func typesOf(evs []Event) []Type {
	out := make([]Type, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func TestDiffWorkloadTransitions(t *testing.T) {
	base := Event{Time: time.Unix(0, 0), Cluster: "manager", Kind: KindWorkload, Namespace: "ns", Name: "wl"}
	wl := &kueue.Workload{}
	wl.Labels = map[string]string{LabelOrigin: "multikueue", "other": "x"}
	created := workloadSnapshot(wl)
	got := diff(base, nil, created)
	if len(got) != 1 || got[0].Type != Created || got[0].Detail != LabelOrigin+"=multikueue" {
		t.Fatalf("created: %+v", got)
	}

	wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"}}
	wl.Status.NominatedClusterNames = []string{"w1", "w2"}
	wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "mk", State: kueue.CheckStatePending}}
	reserved := workloadSnapshot(wl)
	if got := typesOf(diff(base, created, reserved)); len(got) != 3 || got[0] != QuotaReserved || got[1] != Nominated || got[2] != CheckState {
		t.Fatalf("reserved: %v", got)
	}

	wl.Status.NominatedClusterNames = nil
	wl.Status.ClusterName = ptr.To("w2")
	placed := workloadSnapshot(wl)
	evs := diff(base, reserved, placed)
	if got := typesOf(evs); len(got) != 2 || got[0] != Nominated || got[1] != ClusterNameSet || evs[1].ClusterName() != "w2" {
		t.Fatalf("placed: %v", evs)
	}
	if evs[0].ClusterName() != "" {
		t.Fatalf("a nomination read as a placement: %q", evs[0].ClusterName())
	}
	if evs := diff(base, placed, workloadSnapshot(wl)); len(evs) != 0 {
		t.Fatalf("an unchanged object made events: %v", evs)
	}
	wl.Status.Conditions = nil
	if got := typesOf(diff(base, placed, workloadSnapshot(wl))); len(got) != 1 || got[0] != QuotaReleased {
		t.Fatalf("released: %v", got)
	}
}

func TestRecordIsBounded(t *testing.T) {
	o := &Observer{records: map[objKey]*record{}, max: 4}
	r := &record{last: map[string]*snapshot{}}
	for i := 0; i < 10; i++ {
		o.append(r, Event{Detail: string(rune('a' + i))})
	}
	if len(r.events) != 4 || r.dropped != 6 || r.events[0].Detail != "g" {
		t.Fatalf("events %v dropped %d", r.events, r.dropped)
	}
}

// A name reused while the watch was down shows up as an update with a new
// UID: it must read as the old object's deletion and a new creation.
func TestNewUIDUnderTheSameNameIsANewObject(t *testing.T) {
	o := &Observer{records: map[objKey]*record{}, max: 64}
	first := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "uid-1"}}
	second := first.DeepCopy()
	second.UID = "uid-2"
	o.observe("c", KindJob, first, false)
	o.observe("c", KindJob, second, false)
	evs, _ := o.History(KindJob, "ns", "j")
	var got []string
	for _, e := range evs {
		if e.Type == Created || e.Type == Deleted {
			got = append(got, string(e.Type)+"/"+string(e.UID))
		}
	}
	want := []string{"Created/uid-1", "Deleted/uid-1", "Created/uid-2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// A spec or label change shows as Modified, unless a suspend flip already
// tells it (the worker's own Kueue suspends and unsuspends its Jobs).
func TestDiffJobModified(t *testing.T) {
	base := Event{Time: time.Unix(0, 0), Cluster: "worker-1", Kind: KindJob, Namespace: "ns", Name: "j"}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Generation: 1, Labels: map[string]string{"app": "x"}}}
	job.Spec.Suspend = ptr.To(true)
	snap := func() *snapshot { st, _ := JobStateOf(job); return jobSnapshot(job, st) }
	created := snap()
	if got := typesOf(diff(base, nil, created)); len(got) != 3 || got[0] != Created || got[1] != JobSuspended || got[2] != JobStatus {
		t.Fatalf("created: %v", got)
	}
	job.Generation, job.Spec.Suspend = 2, ptr.To(false)
	unsuspended := snap()
	if got := typesOf(diff(base, created, unsuspended)); len(got) != 1 || got[0] != JobUnsuspended {
		t.Fatalf("unsuspended: %v, want no Modified", got)
	}
	job.Generation = 3
	specChanged := snap()
	evs := diff(base, unsuspended, specChanged)
	if len(evs) != 1 || evs[0].Type != Modified || evs[0].Detail != "spec (generation 3)" {
		t.Fatalf("spec change: %+v", evs)
	}
	job.Labels = map[string]string{"app": "y"}
	evs = diff(base, specChanged, snap())
	if len(evs) != 1 || evs[0].Type != Modified || evs[0].Detail != "labels" {
		t.Fatalf("label change: %+v", evs)
	}
}

func TestFromMultiKueue(t *testing.T) {
	for _, c := range []struct {
		labels map[string]string
		want   bool
	}{
		{nil, false},
		{map[string]string{"app": "x"}, false},
		{map[string]string{LabelPrebuiltWorkload: "wl"}, false}, // a worker's own prebuilt-workload Job
		{map[string]string{LabelOrigin: "multikueue"}, true},
		{map[string]string{LabelOrigin: "multikueue", LabelPrebuiltWorkload: "wl"}, true},
	} {
		if got := FromMultiKueue(c.labels); got != c.want {
			t.Errorf("FromMultiKueue(%v) = %t, want %t", c.labels, got, c.want)
		}
	}
}
