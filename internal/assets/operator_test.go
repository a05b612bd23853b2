package assets

import "testing"

// TestOperatorCacheNameFollowsItsMain: an upstream main is cached by name
// and version; a main of this library's also by its source's digest, so
// that changing it rebuilds the binary instead of reusing a stale one.
func TestOperatorCacheNameFollowsItsMain(t *testing.T) {
	if got := JobSetOperator().cacheName("v0.12.0"); got != "jobset-v0.12.0" {
		t.Errorf("upstream main: %q, want jobset-v0.12.0", got)
	}
	a, b := TrainingOperator(), TrainingOperator()
	b.Main += "\n// changed\n"
	if a.cacheName("v1.9.3") == b.cacheName("v1.9.3") {
		t.Errorf("a changed main keeps the cache name %q", a.cacheName("v1.9.3"))
	}
	for _, s := range []OperatorSpec{TrainingOperator(), MPIOperator(), AppWrapperOperator()} {
		if s.Main == "" {
			t.Errorf("%s: no main embedded", s.Name)
		}
	}
}
