package local_test

import (
	"context"
	"os"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	topo, err := local.New(ctx, topology.Options{Workers: 1, Progress: os.Stderr}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	t.Logf("active after %s", time.Since(start))
	job := workload.NewJob("j1", "default").Queue("user-queue").Requests("1", "1Gi").RunFor(time.Second).Obj()
	if err := topo.Manager.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	err = poll.Until(ctx, time.Minute, "job finished", func(ctx context.Context) error {
		var wls kueue.WorkloadList
		if err := topo.Manager.Client.List(ctx, &wls, client.InNamespace("default")); err != nil {
			return err
		}
		for _, wl := range wls.Items {
			for _, c := range wl.Status.Conditions {
				if c.Type == kueue.WorkloadFinished && c.Status == "True" {
					return nil
				}
			}
			return os.ErrDeadlineExceeded
		}
		return os.ErrNotExist
	})
	j := &batchv1.Job{}
	_ = topo.Manager.Client.Get(ctx, client.ObjectKeyFromObject(job), j)
	t.Logf("after %s: err=%v managedBy=%v status=%+v", time.Since(start), err, j.Spec.ManagedBy, j.Status)
	var wls kueue.WorkloadList
	_ = topo.Manager.Client.List(ctx, &wls)
	for _, wl := range wls.Items {
		t.Logf("wl %s cluster=%v nominated=%v conds=%+v acs=%+v", wl.Name, wl.Status.ClusterName, wl.Status.NominatedClusterNames, wl.Status.Conditions, wl.Status.AdmissionChecks)
	}
}
