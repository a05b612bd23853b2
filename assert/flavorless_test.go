package assert_test

import (
	"context"
	"testing"
	"time"

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
	mustFail(t, err, "ExactlyOnceAdmitted failed", `cluster "manager"`, "admitted on the manager", "without any admission check Ready", "requests no resources")
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the failure took %s: it should stop as soon as the manager admitted the Workload", d.Round(time.Second))
	}
}
