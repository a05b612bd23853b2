package assert_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

// multiKueueUser is the user of the default connector's ServiceAccount on
// the workers: multikueue-<manager> in Kueue's namespace.
func multiKueueUser() string {
	return "system:serviceaccount:" + env.Topo.Spec.Kueue.Namespace + ":multikueue-" + env.Topo.Manager.Name
}

// timelineLine returns the line of cluster's part of a failure's timeline
// that matches pattern (a regexp), or fails the test.
func timelineLine(t *testing.T, msg, cluster, pattern string) string {
	t.Helper()
	parts := strings.Split(msg, "    cluster ")
	for _, p := range parts {
		if !strings.HasPrefix(p, fmt.Sprintf("%q:", cluster)) {
			continue
		}
		re := regexp.MustCompile(pattern)
		for _, line := range strings.Split(p, "\n") {
			if re.MatchString(line) {
				return line
			}
		}
	}
	t.Errorf("no line matching %q in cluster %q's timeline:\n%s", pattern, cluster, msg)
	return ""
}

// TestFailureTimelineNamesWhoMadeEachChange provokes a real failure (a Job
// that runs for an hour is not Finished within 5 s) and checks that every
// line of its timeline says who made the change: the test created the Job,
// the manager's Kueue its Workload, MultiKueue (the connector's
// ServiceAccount) the remote copies, the worker's Kueue the admission, the
// Job controller, kube-scheduler and KWOK the run of its pod.
func TestFailureTimelineNamesWhoMadeEachChange(t *testing.T) {
	ctx := context.Background()
	job := workload.NewJob("attributed", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(time.Hour).Obj()
	submit(t, ctx, job)
	wl, winner := placedOn(t, ctx, job)
	jobObserved(t, ctx, winner, job, observe.JobStarted)
	err := checker(5*time.Second).Finished(ctx, job)
	testtopo.FailsNaming(t, err, "Finished failed")
	msg := err.Error()
	mgr := env.Topo.Manager.Name
	q := regexp.QuoteMeta
	sa := q("[by MultiKueue (" + multiKueueUser() + ")]")
	timelineLine(t, msg, mgr, `Job default/attributed Created.*`+q("[by the test (mktk-admin)]"))
	timelineLine(t, msg, mgr, `Workload default/`+q(wl.Name)+` Created.*`+q("[by "+mgr+"'s Kueue (kueue)]"))
	timelineLine(t, msg, mgr, `Workload default/`+q(wl.Name)+` ClusterName "`+winner+`".*`+q("[by "+mgr+"'s Kueue (kueue)]"))
	timelineLine(t, msg, winner, `Workload default/`+q(wl.Name)+` Created `+q(observe.LabelOrigin)+`.*`+sa)
	timelineLine(t, msg, winner, `Job default/attributed Created .*`+q(observe.LabelPrebuiltWorkload+"="+wl.Name)+`.*`+sa)
	timelineLine(t, msg, winner, `Workload default/`+q(wl.Name)+` Admitted.*`+q("[by "+winner+"'s Kueue (kueue)]"))
	// The Job controller starts it and creates its pod, kube-scheduler
	// binds the pod to a KWOK Node, KWOK runs it: the pod's lines are in
	// the timeline (the Observer records a job's pods).
	timelineLine(t, msg, winner, `Job default/attributed Started.*`+q("[by kube-controller-manager (system:kube-controller-manager)]"))
	timelineLine(t, msg, winner, `Pod default/attributed-\S+ Created.*`+q("[by kube-controller-manager (system:kube-controller-manager)]"))
	timelineLine(t, msg, winner, `Pod default/attributed-\S+ Bound `+q(winner)+`-node-\d+.*`+q("[by kube-scheduler (system:kube-scheduler)]"))
	timelineLine(t, msg, winner, `Pod default/attributed-\S+ Phase Running.*`+q("[by the KWOK controller (the kubelet's part) ("))
	// Every line of the job's life on the manager and the winner is
	// attributed.
	for _, cluster := range []string{mgr, winner} {
		for _, p := range strings.Split(msg, "    cluster ") {
			if !strings.HasPrefix(p, fmt.Sprintf("%q:", cluster)) {
				continue
			}
			for _, line := range strings.Split(p, "\n")[1:] {
				if strings.TrimSpace(line) != "" && !strings.Contains(line, "[by ") {
					t.Errorf("cluster %q: a line without its actor: %s", cluster, line)
				}
			}
		}
	}
}

// TestAuditWritesAreReadableWhenTheWriteReturns measures the latency from a
// write to its audit record being readable through the provider's audit
// source (the API server logs in blocking mode), on the manager.
func TestAuditWritesAreReadableWhenTheWriteReturns(t *testing.T) {
	ctx := context.Background()
	ap, ok := env.Topo.Provider().(topology.AuditProvider)
	if !ok {
		t.Fatalf("provider %s offers no audit source", env.Topo.ProviderName)
	}
	mgr := env.Topo.Manager
	src := ap.AuditSource(mgr.Name)
	if src == nil {
		t.Fatal("no audit source for the manager")
	}
	cq := &kueue.ClusterQueue{}
	cq.Name = env.Topo.Spec.Queues.ClusterQueue
	const n = 30
	var afterReturn, total []time.Duration
	for i := range n {
		start := time.Now()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"mktk-audit-probe":"%d"}}}`, i)
		if err := mgr.Client.Patch(ctx, cq, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		for {
			ws, err := src.Writes(ctx, start)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(ws, func(w topology.AuditWrite) bool { return w.Name == cq.Name && w.Verb == "patch" }) {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("patch %d of ClusterQueue %s not in the audit log after 10s", i, cq.Name)
			}
			<-time.After(time.Millisecond) // polling the file: the measurement's resolution
		}
		now := time.Now()
		afterReturn = append(afterReturn, now.Sub(returned))
		total = append(total, now.Sub(start))
	}
	t.Cleanup(func() {
		_ = mgr.Client.Patch(ctx, cq, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"mktk-audit-probe":null}}}`)))
	})
	slices.Sort(afterReturn)
	slices.Sort(total)
	t.Logf("audit record readable after the write returned: median %s, max %s; from the write's start: median %s, max %s (%d writes)",
		afterReturn[n/2], afterReturn[n-1], total[n/2], total[n-1], n)
	if afterReturn[n-1] > time.Second {
		t.Errorf("an audit record took %s after its write returned", afterReturn[n-1])
	}
}
