package assert_test

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestExactlyOnceAdmittedSaysAFlavorlessJobSkipsMultiKueue submits a Job
// that requests no resources. Kueue v0.17 gave a flavorless admission every
// admission check of its ClusterQueue (kubernetes-sigs/kueue#10316); from
// v0.18 checks apply by the admission's flavors, so this Job gets none of
// them: it is admitted on the manager without MultiKueue's check and never
// dispatched (run on v0.19.2, read in v0.18.4's source; v0.17.0 dispatched
// it). The
// failure must say so at once rather than time out on a missing clusterName.
func TestExactlyOnceAdmittedSaysAFlavorlessJobSkipsMultiKueue(t *testing.T) {
	ctx := context.Background()
	job := workload.NewJob("flavorless", "default").Queue("user-queue").RunFor(time.Second).Obj()
	// Registered first, so it runs after submit's cleanup deleted the
	// manager's Job: whatever MultiKueue stranded on the workers then goes.
	t.Cleanup(func() { removeStrandedCopies(t, ctx, job) })
	submit(t, ctx, job)
	c := checker(time.Minute)
	c.Since = time.Now().Add(-time.Second)
	regressed, known := env.Topo.Facts.VersionAtLeast("v0.18.0")
	if !known {
		t.Fatalf("Kueue's version was not read from the cluster (%s)", env.Topo.Facts.Source)
	}
	t.Logf("Kueue %s: a flavorless admission gets no admission check from v0.18 on: expecting it here: %t", env.Topo.Facts.Version, regressed)
	if !regressed {
		if err := c.ExactlyOnceAdmitted(ctx, job); err != nil {
			t.Fatalf("Kueue %s gives a flavorless admission every check, yet: %v", env.Topo.Facts.Version, err)
		}
		return
	}
	start := time.Now()
	err := c.ExactlyOnceAdmitted(ctx, job)
	testtopo.FailsNaming(t, err, "ExactlyOnceAdmitted failed", `cluster "manager"`, "admitted on the manager", "without any admission check Ready", "requests no resources")
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the failure took %s: it should stop as soon as the manager admitted the Workload", d.Round(time.Second))
	}
}

// removeStrandedCopies removes the remote copies (Workloads and Jobs with
// MultiKueue's origin label) of the manager's Job job that are still on the
// workers once the manager's Job is gone, and logs each as a finding.
func removeStrandedCopies(t *testing.T, ctx context.Context, job *batchv1.Job) {
	t.Helper()
	origin := client.HasLabels{observe.LabelOrigin}
	for _, w := range env.Topo.Workers {
		var wls kueue.WorkloadList
		if err := w.Client.List(ctx, &wls, client.InNamespace(job.Namespace), origin); err != nil {
			t.Errorf("cluster %q: listing remote Workloads: %v", w.Name, err)
			continue
		}
		for i := range wls.Items {
			wl := &wls.Items[i]
			if !strings.HasPrefix(wl.Name, "job-"+job.Name+"-") {
				continue
			}
			t.Logf("Kueue %s finding: cluster %q: the remote Workload %s/%s (created %s) outlived the manager's Job %s/%s: MultiKueue dispatched the flavorless Workload before its admission check was dropped and then left its copies; removing them",
				env.Topo.Facts.Version, w.Name, wl.Namespace, wl.Name, wl.CreationTimestamp.Format("15:04:05"), job.Namespace, job.Name)
			removeFrom(t, ctx, w, wl)
		}
		remote := &batchv1.Job{}
		err := w.Client.Get(ctx, client.ObjectKeyFromObject(job), remote)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Errorf("cluster %q: reading Job %s/%s: %v", w.Name, job.Namespace, job.Name, err)
			continue
		}
		if _, ok := remote.Labels[observe.LabelOrigin]; ok {
			t.Logf("Kueue %s finding: cluster %q: the remote Job %s/%s outlived the manager's Job; removing it", env.Topo.Facts.Version, w.Name, job.Namespace, job.Name)
			removeFrom(t, ctx, w, remote)
		}
	}
}
