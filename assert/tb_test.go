package assert_test

import (
	"context"
	"fmt"
	"reflect"
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

// TestEveryCheckHasItsTBForm: each Checker method that returns an error
// (an assertion) has its Asserter twin of the same name and parameters,
// returning bool, so that the TB forms cannot fall behind the checks.
func TestEveryCheckHasItsTBForm(t *testing.T) {
	checker, asserter := reflect.TypeOf(&assert.Checker{}), reflect.TypeOf(&assert.Asserter{})
	errType := reflect.TypeOf((*error)(nil)).Elem()
	n := 0
	for i := range checker.NumMethod() {
		m := checker.Method(i)
		if m.Type.NumOut() != 1 || m.Type.Out(0) != errType {
			continue
		}
		n++
		twin, ok := asserter.MethodByName(m.Name)
		if !ok {
			t.Errorf("Checker.%s has no Asserter.%s (assert/tb.go)", m.Name, m.Name)
			continue
		}
		if twin.Type.NumOut() != 1 || twin.Type.Out(0).Kind() != reflect.Bool {
			t.Errorf("Asserter.%s returns %v, want bool", m.Name, twin.Type)
		}
		if twin.Type.NumIn() != m.Type.NumIn() || twin.Type.IsVariadic() != m.Type.IsVariadic() {
			t.Errorf("Asserter.%s%v takes other parameters than Checker.%s%v", m.Name, twin.Type, m.Name, m.Type)
			continue
		}
		for j := 1; j < m.Type.NumIn(); j++ { // 0 is the receiver
			if twin.Type.In(j) != m.Type.In(j) {
				t.Errorf("Asserter.%s parameter %d is %v, Checker.%s's %v", m.Name, j, twin.Type.In(j), m.Name, m.Type.In(j))
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d assertions on Checker; the listing is broken", n)
	}
}
