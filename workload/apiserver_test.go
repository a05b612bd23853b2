package workload_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestBuiltJobsPassKueuesWebhooks creates a built Job and JobSet, with the
// pod template a kubelet would run, on a local manager: the API server and
// Kueue's real webhooks accept them, default spec.managedBy to MultiKueue
// and keep the pod template; the Job then fails on its worker as its
// annotations say, and the manager's Job reports it.
func TestBuiltJobsPassKueuesWebhooks(t *testing.T) {
	ctx := context.Background()
	topo, err := local.New(ctx, topology.Options{Workers: 1, Kueue: topology.KueueOptions{
		Integrations: []string{topology.IntegrationBatchJob, topology.IntegrationJobSet},
	}}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	mgr := topo.Manager
	lq := topo.Spec.Queues.LocalQueue

	built := workload.NewJob("builtjob", "default").Queue(lq).Requests("100m", "64Mi").RunFor(200 * time.Millisecond).Fails().Obj()
	if err := mgr.Client.Create(ctx, built.DeepCopy()); err != nil {
		t.Fatalf("cluster %q: create Job: %v", mgr.Name, err)
	}
	got := &batchv1.Job{}
	if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(built), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.ManagedBy == nil || *got.Spec.ManagedBy != kueue.MultiKueueControllerName {
		t.Errorf("Job spec.managedBy = %v, want %q (defaulted by Kueue's webhook)", got.Spec.ManagedBy, kueue.MultiKueueControllerName)
	}
	wantC, gotC := built.Spec.Template.Spec.Containers[0], got.Spec.Template.Spec.Containers[0]
	if diff := cmp.Diff(wantC.Command, gotC.Command); diff != "" || gotC.Image != wantC.Image {
		t.Errorf("Job container changed on create: image %q, command (-built +stored):\n%s", gotC.Image, diff)
	}

	js := workload.NewJobSet("builtset", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj()
	if err := mgr.Client.Create(ctx, js.DeepCopy()); err != nil {
		t.Fatalf("cluster %q: create JobSet: %v", mgr.Name, err)
	}
	gotJS := &jobset.JobSet{}
	if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(js), gotJS); err != nil {
		t.Fatal(err)
	}
	if gotJS.Spec.ManagedBy == nil || *gotJS.Spec.ManagedBy != kueue.MultiKueueControllerName {
		t.Errorf("JobSet spec.managedBy = %v, want %q", gotJS.Spec.ManagedBy, kueue.MultiKueueControllerName)
	}
	t.Cleanup(func() {
		bg := client.PropagationPolicy("Background")
		_ = mgr.Client.Delete(context.Background(), gotJS, bg)
		_ = mgr.Client.Delete(context.Background(), got, bg)
	})

	err = poll.Until(ctx, 2*time.Minute, fmt.Sprintf("cluster %q: Job default/builtjob to be Failed", mgr.Name), func(ctx context.Context) error {
		j := &batchv1.Job{}
		if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(built), j); err != nil {
			return err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return nil
			}
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return poll.Stop(errors.New("the Job completed although built with Fails"))
			}
		}
		return errors.New("not Failed yet")
	})
	if err != nil {
		t.Fatal(err)
	}
}
