package local_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestNodes runs Jobs on KWOK Nodes (Options.Nodes): on the worker the Job
// controller creates the pods, kube-scheduler binds them to the worker's
// two Nodes (2 CPU each, its 4-CPU quota split) and KWOK runs them, with
// no executor and no pod runner. A Job of two pods succeeds, a failing Job
// ends Failed with its container's exit code 1, a JobSet's child Job
// succeeds; each manager status ends identical to the worker's. A Job of
// 3 CPU fits the quota but no Node: admitted and dispatched, its pod stays
// Pending, unschedulable. Deleted, no pod or Job is left anywhere.
func TestNodes(t *testing.T) {
	ctx := context.Background()
	topo, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 1, Kueue: topology.KueueOptions{
		Integrations: []string{topology.IntegrationBatchJob, topology.IntegrationJobSet},
	}}, local.Options{Nodes: &local.Nodes{Count: 2}})
	mgr, w, lq := topo.Manager, topo.Workers[0], topo.Spec.Queues.LocalQueue

	var nodes corev1.NodeList
	if err := w.Client.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, n := range nodes.Items {
		names[n.Name] = true
		if cpu := n.Status.Allocatable[corev1.ResourceCPU]; cpu.String() != "2" {
			t.Errorf("cluster %q: Node %s allocates %s CPU, want 2 (the worker's 4-CPU quota over 2 Nodes)", w.Name, n.Name, cpu.String())
		}
	}
	if len(names) != 2 {
		t.Fatalf("cluster %q: Nodes %v, want 2", w.Name, names)
	}

	objs := []client.Object{
		workload.NewJob("pods-ok", "default").Queue(lq).Parallelism(2).Completions(2).Requests("100m", "64Mi").RunFor(time.Second).Obj(),
		workload.NewJob("pods-fail", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Fails().Obj(),
		workload.NewJobSet("pods-set", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj(),
	}
	want := map[string]string{
		"pods-ok":   "Succeeded active=0 succeeded=2 failed=0",
		"pods-fail": "Failed active=0 succeeded=0 failed=1",
		"pods-set":  "Succeeded restarts=0 terminalState=Completed",
	}
	seen := watchPods(ctx, t, w.Config, "default")
	start := time.Now()
	for _, o := range objs {
		if err := mgr.Client.Create(ctx, o); err != nil {
			t.Fatalf("cluster %q: create %T %s: %v", mgr.Name, o, o.GetName(), err)
		}
	}
	a := assert.For(t, env.Check)
	endAsWanted(ctx, t, mgr, a, objs, want)
	t.Logf("2 Jobs and a JobSet (1 s runs, 4 pods on KWOK Nodes) finished on the manager %s after creation", time.Since(start).Round(time.Millisecond))

	// The Observer recorded each job's pods: bound to a Node of the
	// worker, then how they ended.
	for _, c := range []struct {
		kind       observe.Kind
		name, want string
		pods       int
	}{
		{observe.KindJob, "pods-ok", "Succeeded (exit code 0)", 2},
		{observe.KindJob, "pods-fail", "Failed (exit code 1)", 1},
		{observe.KindJobSet, "pods-set", "Succeeded (exit code 0)", 1},
	} {
		bound, ended := map[string]string{}, map[string]string{}
		for _, e := range env.Obs.PodHistory(c.kind, "default", c.name) {
			switch {
			case e.Cluster != w.Name:
				t.Errorf("%s %s: pod %s recorded on %q, want only %q", c.kind, c.name, e.Name, e.Cluster, w.Name)
			case e.Type == observe.PodBound:
				bound[e.Name] = e.Detail
			case e.Type == observe.PodPhase && strings.Contains(e.Detail, "exit code"):
				ended[e.Name] = e.Detail
			}
		}
		if len(bound) != c.pods || len(ended) != c.pods {
			t.Errorf("%s %s: the Observer recorded pods bound %v and ended %v, want %d of each", c.kind, c.name, bound, ended, c.pods)
		}
		for pod, node := range bound {
			if !names[node] || ended[pod] != c.want {
				t.Errorf("%s %s: pod %s recorded bound to %q and ending %q, want one of the Nodes %v and %q", c.kind, c.name, pod, node, ended[pod], names, c.want)
			}
		}
	}

	// Each pod as last seen, before MultiKueue's cleanup deleted it with
	// its Job.
	pods := seen()
	if len(pods) != 4 {
		t.Errorf("cluster %q: %d pods seen, want 4", w.Name, len(pods))
	}
	for _, p := range pods {
		if !names[p.Spec.NodeName] {
			t.Errorf("cluster %q: pod %s was bound to %q, not to one of the Nodes %v", w.Name, p.Name, p.Spec.NodeName, names)
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			t.Errorf("cluster %q: pod %s was last seen %s", w.Name, p.Name, p.Status.Phase)
		}
		wantCode := int32(0)
		if strings.HasPrefix(p.Name, "pods-fail") {
			wantCode = 1
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != wantCode {
				t.Errorf("cluster %q: pod %s container %s ended %+v, want exit code %d", w.Name, p.Name, cs.Name, cs.State, wantCode)
			}
		}
	}
	// Who did what, by the worker's audit log: the scheduler bound the
	// pods, KWOK wrote their status, the Job controller the Jobs'.
	writes, err := topo.Provider().(*local.Provider).AuditSource(w.Name).Writes(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]map[string]bool{}
	for _, wr := range writes {
		k := wr.Resource.Resource + "/" + wr.Subresource
		if by[k] == nil {
			by[k] = map[string]bool{}
		}
		by[k][wr.User] = true
		if k == "jobs/status" && wr.User != "system:kube-controller-manager" {
			t.Errorf("cluster %q: Job %s status written by %s, want only the Job controller", w.Name, wr.Name, wr.User)
		}
	}
	for k, user := range map[string]string{"pods/binding": "system:kube-scheduler", "pods/status": "kwok-controller"} {
		if !by[k][user] {
			t.Errorf("cluster %q: no %s write by %s in the audit log (writers: %v)", w.Name, k, user, by[k])
		}
	}

	// More than a Node holds, within the quota: admitted, dispatched, and
	// its pod Pending on the worker.
	big := workload.NewJob("too-big", "default").Queue(lq).Requests("3", "64Mi").RunFor(time.Second).Obj()
	if err := mgr.Client.Create(ctx, big); err != nil {
		t.Fatal(err)
	}
	err = poll.Until(ctx, 2*time.Minute, fmt.Sprintf("cluster %q: the pod of Job too-big to be unschedulable", w.Name), func(ctx context.Context) error {
		var pods corev1.PodList
		if err := w.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"job-name": "too-big"}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		p := pods.Items[0]
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
					return poll.Stop(fmt.Errorf("pod %s is unschedulable but %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
				}
				t.Logf("cluster %q: pod %s of the admitted Job too-big: %s: %s", w.Name, p.Name, c.Reason, c.Message)
				return nil
			}
		}
		return fmt.Errorf("pod %s: %s, conditions %v", p.Name, p.Status.Phase, p.Status.Conditions)
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, o := range append(objs, big) {
		if err := mgr.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}
	a.NoOrphans(ctx)
	nothingLeft(ctx, t, topo, "default")
}

// watchPods records every pod of ns on the cluster behind cfg as last
// seen (deleted ones included) until the test ends; the returned function
// reads them.
func watchPods(ctx context.Context, t *testing.T, cfg *rest.Config, ns string) func() map[string]corev1.Pod {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wi, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wi.Stop)
	var mu sync.Mutex
	last := map[string]corev1.Pod{}
	go func() {
		for ev := range wi.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				mu.Lock()
				last[p.Name] = *p
				mu.Unlock()
			}
		}
	}()
	return func() map[string]corev1.Pod {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(last)
	}
}

// TestAutoscaledNodesFromZero plays a node pool at zero (a CAPZ MachinePool
// with min 0): the worker starts with no Node, two Jobs of 1 CPU are
// dispatched there and their pods wait unschedulable; the autoscaler adds
// the two 1-CPU Nodes they need after its delay, the pods run, the Jobs
// finish on the manager, and the idle Nodes go again.
func TestAutoscaledNodesFromZero(t *testing.T) {
	ctx := context.Background()
	delay := 2 * time.Second
	topo, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 1}, local.Options{WorkerNodes: map[string]local.Nodes{
		"worker-1": {CPU: "1", Memory: "2Gi", Autoscaler: &local.Autoscaler{Max: 3, Delay: delay, IdleAfter: 3 * time.Second}},
	}})
	mgr, w, lq := topo.Manager, topo.Workers[0], topo.Spec.Queues.LocalQueue
	countNodes := func() int {
		var nodes corev1.NodeList
		if err := w.Client.List(ctx, &nodes); err != nil {
			t.Fatal(err)
		}
		return len(nodes.Items)
	}
	if n := countNodes(); n != 0 {
		t.Fatalf("cluster %q: %d Nodes at the start, want 0", w.Name, n)
	}
	seen := watchPods(ctx, t, w.Config, "default")
	jobs := []client.Object{
		workload.NewJob("scale-a", "default").Queue(lq).Requests("1", "64Mi").RunFor(time.Second).Obj(),
		workload.NewJob("scale-b", "default").Queue(lq).Requests("1", "64Mi").RunFor(time.Second).Obj(),
	}
	start := time.Now()
	for _, o := range jobs {
		if err := mgr.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	a := assert.For(t, env.Check)
	for _, o := range jobs {
		a.ExactlyOnceAdmitted(ctx, o)
		a.Finished(ctx, o)
		a.StatusSynced(ctx, o)
	}
	t.Logf("2 Jobs finished on the manager %s after creation, on Nodes the autoscaler added", time.Since(start).Round(time.Millisecond))
	for name, p := range seen() {
		var unschedulable, scheduled time.Time
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				scheduled = c.LastTransitionTime.Time
			}
		}
		// The condition was Unschedulable before; the pod's creation bounds it.
		unschedulable = p.CreationTimestamp.Time
		if scheduled.IsZero() || !strings.HasPrefix(p.Spec.NodeName, "worker-1-node-") {
			t.Errorf("pod %s: scheduled %v on %q", name, scheduled, p.Spec.NodeName)
			continue
		}
		// Times to the second (the API's); the wait covers the delay.
		if wait := scheduled.Sub(unschedulable); wait < delay-time.Second {
			t.Errorf("pod %s bound %s after its creation, before the autoscaler's %s delay could have passed", name, wait, delay)
		} else {
			t.Logf("pod %s waited %s for a Node (%s)", name, wait, p.Spec.NodeName)
		}
	}
	writes, err := topo.Provider().(*local.Provider).AuditSource(w.Name).Writes(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	for _, wr := range writes {
		if wr.Resource.Resource == "nodes" && wr.Subresource == "" && wr.Verb == "create" {
			created++
			if wr.User != "mktk-autoscaler" {
				t.Errorf("Node %s created by %s, want mktk-autoscaler", wr.Name, wr.User)
			}
		}
	}
	if created != 2 {
		t.Errorf("cluster %q: %d Nodes created, want the 2 the two 1-CPU pods need", w.Name, created)
	}
	for _, o := range jobs {
		if err := mgr.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}
	err = poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: the autoscaler to remove the idle Nodes", w.Name), func(context.Context) error {
		if n := countNodes(); n != 0 {
			return fmt.Errorf("%d Nodes", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a.NoOrphans(ctx)
}

// TestNoOrphansSeesPodsLeftBehind plays kubernetes-sigs/kueue#5452 on KWOK
// Nodes: the remote Job of a running MultiKueue Job is deleted on its
// worker with orphan propagation, so its pod stays; NoOrphans names that
// pod and its gone Job. The look-alike beside it, a worker's own Job whose
// pod runs on the same Node, is not an orphan, and once the left pod is
// deleted NoOrphans passes.
func TestNoOrphansSeesPodsLeftBehind(t *testing.T) {
	ctx := context.Background()
	// MultiKueue's garbage collector every 5 s: NoOrphans waits twice that
	// and its settle time for cleanup, 25 s.
	gc := 5 * time.Second
	topo, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 1, Kueue: topology.KueueOptions{GCInterval: &gc}}, local.Options{Nodes: &local.Nodes{}})
	mgr, w, lq := topo.Manager, topo.Workers[0], topo.Spec.Queues.LocalQueue
	running := func(job string) corev1.Pod {
		t.Helper()
		var pod corev1.Pod
		err := poll.Until(ctx, 2*time.Minute, fmt.Sprintf("cluster %q: a pod of Job %s to run", w.Name, job), func(ctx context.Context) error {
			var pods corev1.PodList
			if err := w.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"job-name": job}); err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					pod = p
					return nil
				}
			}
			return fmt.Errorf("%d pods, none Running", len(pods.Items))
		})
		if err != nil {
			t.Fatal(err)
		}
		return pod
	}
	own := workload.NewJob("workers-own", "default").Requests("100m", "64Mi").RunFor(time.Hour).Obj()
	own.Spec.Suspend = ptr.To(false)
	if err := w.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	running(own.Name)
	job := workload.NewJob("left-pods", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Hour).Obj()
	if err := mgr.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	left := running(job.Name)
	remote := &batchv1.Job{}
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(job), remote); err != nil {
		t.Fatal(err)
	}
	// What kueue#5452 did: the remote Job goes, its pods stay.
	if err := w.Client.Delete(ctx, remote, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	err := poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: the remote Job %s (uid %s) to be gone, its pod orphaned", w.Name, job.Name, remote.UID), func(ctx context.Context) error {
		cur := &batchv1.Job{}
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(job), cur); err == nil && cur.UID == remote.UID {
			return errors.New("still there")
		}
		p := &corev1.Pod{}
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(&left), p); err != nil {
			return poll.Stop(fmt.Errorf("the pod %s went with its Job: %w", left.Name, err))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := *env.Check
	err = c.NoOrphans(ctx)
	if err == nil {
		t.Fatal("NoOrphans passed with the pod of a deleted remote Job left on the worker")
	}
	t.Logf("the failure reads:\n%v", err)
	for _, want := range []string{"NoOrphans failed", `cluster "` + w.Name + `": Pod default/` + left.Name, "Running", "its Job default/left-pods (uid " + string(remote.UID) + ") was MultiKueue's copy and is gone"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the failure does not say %q", want)
		}
	}
	if strings.Contains(err.Error(), "workers-own") {
		t.Errorf("NoOrphans took the worker's own Job's pod for an orphan:\n%v", err)
	}
	if err := w.Client.Delete(ctx, &left); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	if err := c.NoOrphans(ctx); err != nil {
		t.Errorf("NoOrphans after the left pod was deleted, the worker's own pod running: %v", err)
	}
	if err := w.Client.Delete(ctx, own, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
}

// TestTASOnNodes runs Kueue's Topology-Aware Scheduling with MultiKueue as
// Kueue's own MultiKueue TAS tests set it up (a one-level Topology on
// kubernetes.io/hostname and a TAS flavor on every cluster, Nodes on the
// workers only): a Job of 2 pods that requires one host is dispatched, the
// worker's Workload gets a topology assignment at the hostname level, the
// manager's delayed topology request becomes Ready, and both pods run on
// the one assigned Node.
func TestTASOnNodes(t *testing.T) {
	ctx := context.Background()
	topo, env := testtopo.StartObserved(ctx, t, topology.Options{Workers: 2, TAS: &topology.TAS{}}, local.Options{Nodes: &local.Nodes{Count: 2}})
	mgr, lq := topo.Manager, topo.Spec.Queues.LocalQueue
	seen := map[string]func() map[string]corev1.Pod{}
	for _, w := range topo.Workers {
		seen[w.Name] = watchPods(ctx, t, w.Config, "default")
	}
	job := workload.NewJob("tas", "default").Queue(lq).Parallelism(2).Completions(2).Requests("500m", "200Mi").
		RequiredTopology(corev1.LabelHostname).RunFor(2 * time.Second).Obj()
	if err := mgr.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	a := assert.For(t, env.Check)
	a.ExactlyOnceAdmitted(ctx, job)
	a.Finished(ctx, job)
	a.StatusSynced(ctx, job)

	var mwl kueue.Workload
	wlName := ""
	var wls kueue.WorkloadList
	if err := mgr.Client.List(ctx, &wls, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, wl := range wls.Items {
		if metav1.IsControlledBy(&wl, job) {
			mwl, wlName = wl, wl.Name
		}
	}
	if wlName == "" || mwl.Status.Admission == nil || mwl.Status.ClusterName == nil {
		t.Fatalf("cluster %q: no admitted, placed Workload of Job tas: %+v", mgr.Name, mwl.Status)
	}
	psa := mwl.Status.Admission.PodSetAssignments[0]
	if psa.DelayedTopologyRequest == nil || *psa.DelayedTopologyRequest != kueue.DelayedTopologyRequestStateReady || psa.TopologyAssignment != nil {
		t.Errorf("cluster %q: the manager's assignment: delayed topology request %v, topology assignment %+v; want Ready and none", mgr.Name, psa.DelayedTopologyRequest, psa.TopologyAssignment)
	}
	winner := *mwl.Status.ClusterName
	var w *topology.Cluster
	for _, c := range topo.Workers {
		if c.Name == winner {
			w = c
		}
	}
	// The worker's copy is gone once the manager's Workload finished: read
	// the assignment from the pods Kueue's topology ungater pinned.
	hosts := map[string]bool{}
	for name, p := range seen[winner]() {
		host := p.Spec.NodeSelector[corev1.LabelHostname]
		if host == "" || p.Spec.NodeName != host {
			t.Errorf("cluster %q: pod %s: nodeSelector %v, bound to %q; want the assigned host and bound there", winner, name, p.Spec.NodeSelector, p.Spec.NodeName)
		}
		for _, g := range p.Spec.SchedulingGates {
			t.Errorf("cluster %q: pod %s still has the scheduling gate %s", winner, name, g.Name)
		}
		hosts[host] = true
	}
	if len(hosts) != 1 {
		t.Errorf("cluster %q: the Job's pods ran on hosts %v; the required topology wants one", winner, hosts)
	}
	t.Logf("Job tas: placed on %s, its 2 pods on host %v (manager: delayed topology request %s)", w.Name, hosts, *psa.DelayedTopologyRequest)
}
