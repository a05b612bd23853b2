package testtopo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
)

// DispatchedOnce reports, through a, every per-workload assertion of a
// dispatched job that runs to its end, then NoOrphans.
func DispatchedOnce(ctx context.Context, t testing.TB, a *assert.Asserter, job client.Object) {
	t.Helper()
	a.ExactlyOnceAdmitted(ctx, job)
	a.NominationCleared(ctx, job)
	a.LosersCleaned(ctx, job)
	a.Finished(ctx, job)
	a.StatusSynced(ctx, job)
	a.NoOrphans(ctx)
}

// FailsNaming checks that err is an assertion failure (assert.Failure)
// whose message contains every want, and logs it: the log is the
// documentation of what a user sees.
func FailsNaming(t testing.TB, err error, wants ...string) {
	t.Helper()
	var f *assert.Failure
	if !errors.As(err, &f) {
		t.Fatalf("want an assertion failure, got %v", err)
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("failure message lacks %q:\n%v", want, err)
		}
	}
	t.Logf("the failure reads:\n%v", err)
}
