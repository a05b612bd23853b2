package assert_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
)

// dispatchedOnce reports, through a, every per-workload assertion of a
// dispatched job that runs to its end, then NoOrphans.
func dispatchedOnce(t *testing.T, ctx context.Context, a *assert.Asserter, job client.Object) {
	t.Helper()
	a.ExactlyOnceAdmitted(ctx, job)
	a.NominationCleared(ctx, job)
	a.LosersCleaned(ctx, job)
	a.Finished(ctx, job)
	a.StatusSynced(ctx, job)
	a.NoOrphans(ctx)
}
