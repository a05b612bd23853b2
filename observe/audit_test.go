package observe

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/multikueue-testkit/testkit/topology"
)

type writesSource []topology.AuditWrite

func (s writesSource) Writes(context.Context, time.Time) ([]topology.AuditWrite, error) {
	return s, nil
}

// TestAttributeMatchesEachEventToItsWrite covers the matching rules on
// hand-made audit records (the end-to-end proof is in package assert).
func TestAttributeMatchesEachEventToItsWrite(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	wl := schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "workloads"}
	job := schema.GroupResource{Group: "batch", Resource: "jobs"}
	mkc := schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "multikueueclusters"}
	sa := "system:serviceaccount:kueue-system:multikueue-manager"
	w := func(ms int, verb string, gr schema.GroupResource, sub, user string, role topology.WriterRole) topology.AuditWrite {
		return topology.AuditWrite{Received: at(ms), Completed: at(ms + 2), Verb: verb, Resource: gr, Subresource: sub,
			Namespace: "default", Name: "a", Code: 200, User: user, Role: role}
	}
	o := &Observer{audit: map[string]topology.AuditSource{
		"worker-1": writesSource{
			w(100, "create", wl, "", sa, ""),
			w(104, "patch", wl, "status", "kueue", topology.WriterKueue),
			w(10, "create", mkc, "", "mktk-admin", topology.WriterTest),
			w(20, "update", mkc, "status", "kueue", topology.WriterKueue),
			w(200, "create", job, "", sa, ""),
			w(300, "update", job, "status", "mktk-agent", topology.WriterAgent),
			w(400, "delete", wl, "", sa, ""),
			w(401, "update", wl, "", "kueue", topology.WriterKueue),
			w(900, "patch", wl, "status", "kueue", topology.WriterKueue),
		},
	}}
	ev := func(ms int, cluster string, k Kind, typ Type) Event {
		return Event{Time: at(ms), Cluster: cluster, Kind: k, Namespace: "default", Name: "a", Type: typ}
	}
	events := []Event{
		ev(105, "worker-1", KindWorkload, Created), // the status patch at 104 came first, but this is a creation
		ev(105, "worker-1", KindWorkload, QuotaReserved),
		ev(110, "worker-1", KindWorkload, Admitted), // the patch at 104
		// Seen when the Observer started: created by the test, made Active
		// by Kueue since.
		ev(1000, "worker-1", KindMultiKueueCluster, Created),
		ev(1000, "worker-1", KindMultiKueueCluster, ClusterActive),
		ev(204, "worker-1", KindJob, Created),
		ev(305, "worker-1", KindJob, JobStarted),
		ev(403, "worker-1", KindWorkload, DeletionRequested), // the delete, not the update at 401
		ev(404, "worker-1", KindWorkload, Deleted),           // the update that removed the finalizer
		ev(50, "worker-1", KindJob, JobStatus),               // before any write: unknown
		ev(105, "manager", KindWorkload, Created),            // no audit source
	}
	got, err := o.Attribute(context.Background(), events, Identity{Cluster: "worker-1", User: sa, Role: topology.WriterMultiKueue})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		user string
		role topology.WriterRole
		verb string
	}{
		{sa, topology.WriterMultiKueue, "create"},
		{sa, topology.WriterMultiKueue, "create"},
		{"kueue", topology.WriterKueue, "patch status"},
		{"mktk-admin", topology.WriterTest, "create"},
		{"kueue", topology.WriterKueue, "update status"},
		{sa, topology.WriterMultiKueue, "create"},
		{"mktk-agent", topology.WriterAgent, "update status"},
		{sa, topology.WriterMultiKueue, "delete"},
		{"kueue", topology.WriterKueue, "update"},
		{"", "", ""},
		{"", "", ""},
	}
	for i, w := range want {
		a := got[i].Actor
		if a.User != w.user || a.Role != w.role || a.Verb != w.verb {
			t.Errorf("event %d (%s %s at +%s): actor %+v, want %+v", i, got[i].Kind, got[i].Type, got[i].Time.Sub(t0), a, w)
		}
	}
	if !events[0].Actor.IsZero() {
		t.Error("Attribute changed its input")
	}
	tl := Timeline(got, []string{"manager", "worker-1"})
	for _, line := range []string{
		"Job default/a Created  [by MultiKueue (" + sa + ")]",
		"Workload default/a Admitted  [by worker-1's Kueue (kueue)]",
		"Job default/a Started  [by the local agent (mktk-agent)]",
	} {
		if !strings.Contains(tl, line) {
			t.Errorf("timeline lacks %q:\n%s", line, tl)
		}
	}
	if strings.Contains(strings.Split(tl, `cluster "worker-1"`)[0], "[by") {
		t.Errorf("a cluster without audit got actors:\n%s", tl)
	}
}

func TestAttributeWithoutAuditKeepsEvents(t *testing.T) {
	o := &Observer{}
	in := []Event{{Time: time.Now(), Cluster: "c", Kind: KindWorkload, Type: Created}}
	out, err := o.Attribute(context.Background(), in)
	if err != nil || len(out) != 1 || !out[0].Actor.IsZero() || o.HasAudit() {
		t.Fatalf("got %+v, %v", out, err)
	}
}

// TestAttributeAPodToItsCreatorNotItsBinding: a Job's pod is created with
// generateName (the create's objectRef has no name) and bound by
// kube-scheduler (a create of the pods/binding subresource, which names
// it). When the binding reaches the audit log before the Observer sees the
// pod, the pod's creation is still the Job controller's (caught by CI).
func TestAttributeAPodToItsCreatorNotItsBinding(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	pods := schema.GroupResource{Resource: "pods"}
	kcm := "system:kube-controller-manager"
	sched := "system:kube-scheduler"
	o := &Observer{audit: map[string]topology.AuditSource{
		"worker-1": writesSource{
			{Received: at(100), Completed: at(102), Verb: "create", Resource: pods, Namespace: "default", Code: 201, User: kcm},
			{Received: at(104), Completed: at(106), Verb: "create", Resource: pods, Subresource: "binding", Namespace: "default", Name: "job-x1", Code: 201, User: sched},
		},
	}}
	events := []Event{
		{Time: at(110), Cluster: "worker-1", Kind: KindPod, Namespace: "default", Name: "job-x1", Type: Created},
		{Time: at(110), Cluster: "worker-1", Kind: KindPod, Namespace: "default", Name: "job-x1", Type: PodBound},
	}
	got, err := o.Attribute(context.Background(), events)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Actor.User != kcm || got[0].Actor.Verb != "create" {
		t.Errorf("the pod's creation: actor %+v, want %s's create", got[0].Actor, kcm)
	}
	if got[1].Actor.User != sched || got[1].Actor.Verb != "create binding" {
		t.Errorf("the pod's binding: actor %+v, want %s's create binding", got[1].Actor, sched)
	}
}
