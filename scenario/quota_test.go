package scenario_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
)

// TestQuota runs the quota scenario three times on 3 workers of 4 CPU each
// with Jobs of 2 CPU (the workers fit 6 at once): the manager's quota as
// the topology sets it, the workers' sum (balanced, 6); cut to 6 CPU
// (under-provisioned, 3); raised to 20 CPU (over-provisioned, 10). Each run
// submits twice the larger capacity at once. The manager's ClusterQueue is
// restored afterwards.
func TestQuota(t *testing.T) {
	ctx := context.Background()
	env := mixed.get(t)
	orig := managerCPU(ctx, t, env)
	t.Cleanup(func() { setManagerCPU(context.Background(), t, env, orig) })
	for _, tc := range []struct {
		name string
		cpu  string // manager's CPU quota; "" keeps it
		want scenario.Provisioning
	}{
		{"Balanced", "", scenario.Balanced},
		{"Under", "6", scenario.UnderProvisioned},
		{"Over", "20", scenario.OverProvisioned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cpu != "" {
				setManagerCPU(ctx, t, env, resource.MustParse(tc.cpu))
			}
			start := time.Now()
			res, _ := scenario.For(t, env).Quota(ctx, scenario.QuotaOptions{Dispatch: scenario.DispatchOptions{CPU: "2", NamePrefix: "quota-" + strings.ToLower(tc.name)}})
			t.Logf("%s: %d Jobs in %s; manager fits %d, workers %d; peaks: %d reserved on the manager, %d running on workers (%d copies admitted), %d queued, %d starved; %s",
				res.Provisioning, len(res.Objects), time.Since(start).Round(time.Millisecond), res.ManagerSlots, res.WorkerSlots,
				res.PeakManagerReserved, res.PeakRunning, res.PeakCopies, res.PeakQueued, res.PeakStarved, res.Evidence)
			if res.Provisioning != tc.want {
				t.Errorf("provisioning %q, want %q", res.Provisioning, tc.want)
			}
		})
	}
}

// managerCPU returns the CPU nominal quota of the manager's ClusterQueue.
func managerCPU(ctx context.Context, t *testing.T, env *scenario.Env) resource.Quantity {
	t.Helper()
	cq := &kueue.ClusterQueue{}
	if err := env.Topo.Manager.Client.Get(ctx, client.ObjectKey{Name: env.Topo.Spec.Queues.ClusterQueue}, cq); err != nil {
		t.Fatal(err)
	}
	return *cpuQuota(cq)
}

func cpuQuota(cq *kueue.ClusterQueue) *resource.Quantity {
	for i := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
		if r := &cq.Spec.ResourceGroups[0].Flavors[0].Resources[i]; r.Name == corev1.ResourceCPU {
			return &r.NominalQuota
		}
	}
	return nil
}

// setManagerCPU sets the CPU nominal quota of the manager's ClusterQueue and
// waits until the Observer has it.
func setManagerCPU(ctx context.Context, t *testing.T, env *scenario.Env, q resource.Quantity) {
	t.Helper()
	mgr := env.Topo.Manager
	name := env.Topo.Spec.Queues.ClusterQueue
	cq := &kueue.ClusterQueue{}
	if err := mgr.Client.Get(ctx, client.ObjectKey{Name: name}, cq); err != nil {
		t.Fatal(err)
	}
	*cpuQuota(cq) = q
	if err := mgr.Client.Update(ctx, cq); err != nil {
		t.Fatalf("cluster %q: ClusterQueue %s: set CPU quota to %s: %v", mgr.Name, name, q.String(), err)
	}
	err := poll.Until(ctx, time.Minute, fmt.Sprintf("the Observer to see ClusterQueue %s with %s CPU", name, q.String()), func(ctx context.Context) error {
		got := &kueue.ClusterQueue{}
		if err := env.Obs.Reader(mgr.Name).Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return err
		}
		if limit, _ := observe.QuotaLimit(got); !limit.Cpu().Equal(q) {
			return fmt.Errorf("it has %s", limit.Cpu().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
