package scenario_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
)

// TestDisconnect cuts the connection to the worker running the most Jobs
// (its kubeconfig Secret on the manager pointed at an unreachable address;
// the worker runs on) on 1 manager + 3 workers with a 20 s
// workerLostTimeout, with no process control (the topology seen as an
// attached one: no cluster has a Lifecycle, as with the existing, kind or
// CAPZ providers): Inactive, the in-flight Jobs
// held and re-dispatched, Active again once restored, every Job finished
// and synced, nothing left behind. The known findings of the Kueue under
// test are logged, as in TestWorkerOutage. Afterwards the Secret is
// byte for byte what it was.
func TestDisconnect(t *testing.T) {
	ctx := context.Background()
	env := attached(resilient.get(t))
	before := map[string][]byte{}
	for _, w := range env.Topo.Workers {
		if b, ok := kubeconfigOf(ctx, t, env, w.Name); ok {
			before[w.Name] = b
		}
	}
	start := time.Now()
	res, err := scenario.Disconnect(ctx, env, scenario.DisconnectOptions{Dispatch: scenario.DispatchOptions{NamePrefix: "disconnect"}})
	t.Logf("%d Jobs in %s; cut %s at %s (Inactive %s later), restored at %s (Active %s later)", len(res.Objects), time.Since(start).Round(time.Millisecond),
		res.Worker, res.Stopped.Format("15:04:05.000"), res.Inactive.Sub(res.Stopped).Round(time.Millisecond),
		res.Restarted.Format("15:04:05.000"), res.Active.Sub(res.Restarted).Round(time.Millisecond))
	var blocked func(client.Object) string
	if v019, _ := env.Topo.Facts.VersionAtLeast("v0.19.0"); v019 {
		blocked = func(o client.Object) string { return finishedWhileCut(env, o, res) }
	}
	judgeLostWorker(t, env, res, err, blocked)
	if b, ok := kubeconfigOf(ctx, t, env, res.Worker); ok && !bytes.Equal(b, before[res.Worker]) {
		t.Errorf("the kubeconfig Secret of %q differs from what it was before the cut", res.Worker)
	}
}

// TestDisconnectFailsWhenTheWorkerStaysReachable points worker-1's
// connection at a second path to the same API server (localhost instead of
// 127.0.0.1, both in its certificate): the worker is not lost, so Disconnect
// must fail, and name why: the MultiKueueCluster never went Active=False
// and the in-flight Jobs were not re-dispatched. Its Checker waits 30 s, not
// the usual 2 minutes: nothing is expected to change.
func TestDisconnectFailsWhenTheWorkerStaysReachable(t *testing.T) {
	ctx := context.Background()
	env := attached(resilient.get(t))
	env.Check.Timeout = 30 * time.Second
	w := env.Topo.Worker("worker-1")
	second := strings.Replace(w.ServerForManager(), "127.0.0.1", "localhost", 1)
	if second == w.ServerForManager() {
		t.Fatalf("worker-1's server %q has no 127.0.0.1 to swap for localhost", w.ServerForManager())
	}
	res, err := scenario.Disconnect(ctx, env, scenario.DisconnectOptions{Worker: "worker-1", Address: second,
		Dispatch: scenario.DispatchOptions{NamePrefix: "reachable"}})
	if err == nil {
		t.Fatal("Disconnect passed although the worker stayed reachable through its second address")
	}
	var inactive bool
	for _, e := range leaves(err) {
		var f *assert.Failure
		if errors.As(e, &f) && f.Assertion == "ClusterInactive" {
			inactive = true
		}
	}
	if !inactive || !strings.Contains(err.Error(), "to be placed on a worker other than \"worker-1\"") {
		t.Errorf("want ClusterInactive failed and the in-flight Jobs not re-dispatched, got:\n%v", err)
	}
	if !res.Inactive.IsZero() {
		t.Errorf("the MultiKueueCluster was recorded Inactive at %s", res.Inactive.Format("15:04:05.000"))
	}
}

// finishedWhileCut returns, for o, the story when its copy on the lost
// worker finished while the connection was cut (the worker ran on), the
// manager re-dispatched it, and once the connection was back MultiKueue
// took that stale copy for the Workload's result. Seen with Kueue v0.19.2:
// reconcileGroup finishes the manager Workload from
// bestMatchByCondition(Finished), the remote that finished earliest, which
// is the stale copy on the lost worker, and copies its Job's status first
// (SyncJob). Two outcomes:
//
//   - the manager Workload never finishes though the next worker's copy did
//     (2 to 3 of the 3 Jobs in flight at the cut, in each of three local
//     runs, 2026-12-04): the API server refuses the status copy
//     ("status.startTime: field is immutable for unsuspended job once set":
//     the manager's Job, re-dispatched, already has the new copy's
//     startTime), Kueue's log shows "copying remote controller status"
//     failing every retry, so the manager's Job never ends and the stale
//     copy is never removed;
//   - the copy goes through (the manager's Job had no new startTime yet):
//     the manager's Job ends with the stale copy's status, and MultiKueue
//     deletes the copy it had re-dispatched to, still running (1 of 3 Jobs
//     in the CI run of 2026-12-07; StatusSynced names it).
//
// "" otherwise.
func finishedWhileCut(env *scenario.Env, o client.Object, res scenario.OutageResult) string {
	mgr := env.Topo.Manager.Name
	mwl, err := observe.WorkloadOf(context.Background(), env.Obs.Reader(mgr), o.GetNamespace(), o.GetUID())
	if err != nil {
		return ""
	}
	wl, _ := env.Obs.History(observe.KindWorkload, mwl.Namespace, mwl.Name)
	var lostDone, otherDone, mgrDone time.Time
	other := ""
	for _, e := range wl {
		switch {
		case e.Type != observe.Finished:
		case e.Cluster == mgr:
			mgrDone = e.Time
		case e.Cluster == res.Worker && e.Time.After(res.Stopped) && e.Time.Before(res.Restarted):
			lostDone = e.Time
		case e.Cluster != res.Worker && e.Time.After(res.Stopped):
			otherDone, other = e.Time, e.Cluster
		}
	}
	if lostDone.IsZero() {
		return ""
	}
	cut := fmt.Sprintf("Job %s/%s: its copy on the cut-off worker %q finished at %s while the connection was cut (%s–%s)",
		o.GetNamespace(), o.GetName(), res.Worker, lostDone.Format("15:04:05.000"), res.Stopped.Format("15:04:05.000"), res.Restarted.Format("15:04:05.000"))
	switch {
	case mgrDone.IsZero() && !otherDone.IsZero():
		return fmt.Sprintf("%s, the copy it was re-dispatched to on %q finished at %s, and the manager Workload %s never finished: MultiKueue finishes it from the earliest finished remote, the stale one",
			cut, other, otherDone.Format("15:04:05.000"), mwl.Name)
	case mgrDone.IsZero() || mgrDone.Before(res.Restarted):
		return ""
	}
	// The manager finished after the connection was back: from the stale
	// copy when the re-dispatched one was deleted before it finished.
	jobs, _ := env.Obs.History(observe.KindJob, o.GetNamespace(), o.GetName())
	created, ended := map[string]bool{}, map[string]bool{}
	for _, e := range jobs {
		if e.Cluster == mgr || e.Cluster == res.Worker {
			continue
		}
		switch e.Type {
		case observe.Created:
			created[e.Cluster] = e.Time.After(res.Stopped)
		case observe.JobSucceeded, observe.JobFailed:
			ended[e.Cluster] = true
		case observe.Deleted:
			if created[e.Cluster] && !ended[e.Cluster] && !e.Time.Before(res.Restarted) {
				return fmt.Sprintf("%s; once the connection was back MultiKueue finished the manager Workload %s from it at %s (the earliest finished remote) and deleted the copy it had re-dispatched to on %q, unfinished, at %s",
					cut, mwl.Name, mgrDone.Format("15:04:05.000"), e.Cluster, e.Time.Format("15:04:05.000"))
			}
		}
	}
	return ""
}

// kubeconfigOf reads the kubeconfig Kueue uses for worker from its Secret.
func kubeconfigOf(ctx context.Context, t *testing.T, env *scenario.Env, worker string) ([]byte, bool) {
	t.Helper()
	mgr := env.Topo.Manager
	var mkc kueue.MultiKueueCluster
	if err := mgr.Client.Get(ctx, client.ObjectKey{Name: worker}, &mkc); err != nil {
		t.Errorf("cluster %q: read MultiKueueCluster %s: %v", mgr.Name, worker, err)
		return nil, false
	}
	kc := mkc.Spec.ClusterSource.KubeConfig
	if kc == nil || (kc.LocationType != "" && kc.LocationType != kueue.SecretLocationType) {
		t.Errorf("cluster %q: MultiKueueCluster %s: want a kubeconfig Secret source, got %+v", mgr.Name, worker, mkc.Spec.ClusterSource)
		return nil, false
	}
	var sec corev1.Secret
	if err := mgr.Client.Get(ctx, client.ObjectKey{Namespace: env.Topo.Spec.Kueue.Namespace, Name: kc.Location}, &sec); err != nil {
		t.Errorf("cluster %q: read Secret %s: %v", mgr.Name, kc.Location, err)
		return nil, false
	}
	return sec.Data[connect.SecretKey], true
}

// attached returns env as an attached provider would hand it over: the same
// clusters, Observer and Checker settings, but no cluster with a Lifecycle.
func attached(env *scenario.Env) *scenario.Env {
	topo := topology.Topology{Spec: env.Topo.Spec, Facts: env.Topo.Facts, ProviderName: env.Topo.ProviderName + " (seen as attached)", ConnectorName: env.Topo.ConnectorName}
	strip := func(c *topology.Cluster) *topology.Cluster {
		cp := *c
		cp.Lifecycle = nil
		return &cp
	}
	topo.Manager = strip(env.Topo.Manager)
	topo.Workers = nil
	for _, w := range env.Topo.Workers {
		topo.Workers = append(topo.Workers, strip(w))
	}
	chk := *env.Check
	chk.Topo = &topo
	out := *env
	out.Topo, out.Check = &topo, &chk
	return &out
}
