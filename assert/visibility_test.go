package assert_test

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestPendingVisible runs on its own topology whose manager's Kueue has two
// replicas (HA) and a quota of one Job: one Job holds it, three wait with
// priorities high, mid, low. Every replica, asked directly, lists them in
// that order (ClusterQueue and LocalQueue). Then, each built for real: a
// wrong expected order fails naming both replicas; a replica cut off from
// its API server (PartitionReplica) keeps answering from its stale queues
// and fails it by name while the other passes, and passes again once
// healed; a replica whose visibility server is stopped fails it by name.
func TestPendingVisible(t *testing.T) {
	ctx := context.Background()
	quota := topology.Quota{CPU: "1", Memory: "1Gi"}
	start := time.Now()
	topo, e := testtopo.StartObserved(ctx, t, topology.Options{Workers: 1, ManagerQuota: &quota}, local.Options{HA: local.HA{Manager: true}})
	t.Logf("HA topology ready and observed in %s", time.Since(start).Round(time.Millisecond))
	p := topo.Provider().(*local.Provider)
	mgr := topo.Manager
	ns, lq := topo.Spec.Queues.Namespaces[0], topo.Spec.Queues.LocalQueue
	for name, v := range map[string]int32{"pv-low": 100, "pv-mid": 200, "pv-high": 300} {
		if err := mgr.Client.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	job := func(name, prio string) *batchv1.Job {
		b := workload.NewJob(name, ns).Queue(lq).Requests("1", "1Gi").RunFor(10 * time.Minute)
		if prio != "" {
			b = b.WorkloadPriorityClass(prio)
		}
		j := b.Obj()
		if err := mgr.Client.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	a := assert.Require(t, e.Check)
	a.ExactlyOnceAdmitted(ctx, job("pv-holds-quota", ""))
	low, mid, high := job("pv-low", "pv-low"), job("pv-mid", "pv-mid"), job("pv-high", "pv-high")
	cq := assert.PendingQueue{ClusterQueue: topo.Spec.Queues.ClusterQueue}
	var newest *batchv1.Job // submitted while kueue-1 is cut off

	t.Run("every replica lists them in order", func(t *testing.T) {
		a := assert.For(t, e.Check)
		a.PendingVisible(ctx, cq, high, mid, low)
		a.PendingVisible(ctx, assert.PendingQueue{Namespace: ns, LocalQueue: lq}, high, mid, low)
	})
	short := *e.Check
	short.Timeout = 3 * time.Second

	t.Run("another order fails, naming each replica", func(t *testing.T) {
		err := short.PendingVisible(ctx, cq, low, mid, high)
		testtopo.FailsNaming(t, err, `replica kueue-0`, `replica kueue-1`, "lists [default/job-pv-high-")
	})

	t.Run("a replica serving stale answers fails it by name", func(t *testing.T) {
		if err := p.PartitionReplica(ctx, mgr.Name, "kueue-1"); err != nil {
			t.Fatal(err)
		}
		newest = job("pv-newest", "pv-low")
		err := short.PendingVisible(ctx, cq, high, mid, low, newest)
		testtopo.FailsNaming(t, err, `cluster "manager": replica kueue-1`)
		if strings.Contains(err.Error(), "replica kueue-0") {
			t.Errorf("the up-to-date replica kueue-0 is blamed too:\n%v", err)
		}
		if err := p.HealReplica(ctx, mgr.Name, "kueue-1"); err != nil {
			t.Fatal(err)
		}
		healed := time.Now()
		assert.For(t, e.Check).PendingVisible(ctx, cq, high, mid, low, newest)
		t.Logf("kueue-1 lists the new workload %s after its network came back", time.Since(healed).Round(time.Millisecond))
	})

	t.Run("a replica whose visibility server is stopped fails it by name", func(t *testing.T) {
		if leader, err := p.LeaderReplica(ctx, mgr.Name); err != nil || leader != "kueue-0" {
			t.Fatalf("leader %q (%v), want kueue-0 so that kueue-1 is the non-leader", leader, err)
		}
		if err := p.StopVisibility(ctx, mgr.Name, "kueue-1"); err != nil {
			t.Fatal(err)
		}
		if newest == nil {
			t.Skip("needs the previous subtest's workload")
		}
		err := short.PendingVisible(ctx, cq, high, mid, low, newest)
		testtopo.FailsNaming(t, err, `cluster "manager": replica kueue-1`, "the visibility request failed")
		if strings.Contains(err.Error(), "replica kueue-0") {
			t.Errorf("the serving replica kueue-0 is blamed too:\n%v", err)
		}
	})
}
