package observe

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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

// TestDiffManagedPodTransitions: a pod that is a job object of its own is
// told with a job's transitions (and its Node), a Job's pod with a pod's.
func TestDiffManagedPodTransitions(t *testing.T) {
	base := Event{Time: time.Unix(0, 0), Cluster: "worker1", Kind: KindPod, Namespace: "ns", Name: "p"}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{LabelManaged: "true", LabelOrigin: "multikueue"}}}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: PodAdmissionGate}}
	created := podSnapshot(p, true)
	if got := typesOf(diff(base, nil, created)); strings.Join(typesStr(got), " ") != "Created Suspended Status" {
		t.Fatalf("created: %v", got)
	}
	p.Spec.SchedulingGates, p.Spec.NodeName, p.Status.Phase = nil, "kwok-node-0", corev1.PodRunning
	running := podSnapshot(p, true)
	if got := typesOf(diff(base, created, running)); strings.Join(typesStr(got), " ") != "Bound Unsuspended Started Status" {
		t.Fatalf("running: %v", got)
	}
	p.Status.Phase = corev1.PodSucceeded
	if got := typesOf(diff(base, running, podSnapshot(p, true))); strings.Join(typesStr(got), " ") != "Succeeded Status" {
		t.Fatalf("succeeded: %v", got)
	}
	child := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-x"}, Spec: corev1.PodSpec{NodeName: "kwok-node-0"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if got := typesOf(diff(base, nil, podSnapshot(child, false))); strings.Join(typesStr(got), " ") != "Created Bound Phase" {
		t.Fatalf("a Job's pod: %v", got)
	}
}

func typesStr(ts []Type) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}
