package assert_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	testifyassert "github.com/stretchr/testify/assert"

	"github.com/multikueue-testkit/testkit/assert"
)

// errorfOnly is the smallest TB: Errorf, no Helper (testify's TestingT).
type errorfOnly struct{ msgs []string }

func (e *errorfOnly) Errorf(format string, args ...any) {
	e.msgs = append(e.msgs, fmt.Sprintf(format, args...))
}

// Any testify TestingT is a TB.
var _ assert.TB = testifyassert.TestingT(nil)

// TestErrorfOnlyTB runs an Asserter on a TB without Helper: a holding
// assertion reports nothing, a failing one reports once through Errorf.
func TestErrorfOnlyTB(t *testing.T) {
	ctx := context.Background()
	rec := &errorfOnly{}
	if !assert.For(rec, env.Check).SetupActive(ctx) || len(rec.msgs) != 0 {
		t.Fatalf("SetupActive on a healthy topology: reported %q", rec.msgs)
	}
	short := *env.Check
	short.Timeout = 2 * time.Second
	if assert.For(rec, &short).ClusterActive(ctx, "no-such-worker") {
		t.Fatal("ClusterActive held for a MultiKueueCluster that does not exist")
	}
	if len(rec.msgs) != 1 || !strings.Contains(rec.msgs[0], "no-such-worker") {
		t.Fatalf("want one report naming no-such-worker, got %q", rec.msgs)
	}
}
