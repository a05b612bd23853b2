// Package kueuefix is for tests whose expected verdict depends on the Kueue
// release a topology runs: the defect before the release that fixed it, the
// fix from there.
package kueuefix

import (
	"testing"

	"github.com/multikueue-testkit/testkit/topology"
)

// In reports whether the Kueue f describes is at least fixedIn, the release
// that changed what, and logs which behaviour the test expects; it fails the
// test if the version was not read from the cluster.
func In(t testing.TB, f topology.KueueFacts, fixedIn, what string) bool {
	t.Helper()
	fixed, known := f.VersionAtLeast(fixedIn)
	if !known {
		t.Fatalf("Kueue's version was not read from the cluster (%s): cannot tell whether %s applies", f.Source, what)
	}
	if fixed {
		t.Logf("Kueue %s is at least %s: %s; expecting the fixed behaviour", f.Version, fixedIn, what)
	} else {
		t.Logf("Kueue %s is before %s: %s; expecting the defect", f.Version, fixedIn, what)
	}
	return fixed
}
