package scenario

import (
	"errors"

	"github.com/multikueue-testkit/testkit/assert"
)

// Runner runs the scenarios of an Env and reports each failure through a TB,
// as assert.Asserter does for the assertions: For reports with Errorf and
// lets the test go on, Require stops it with Fatalf. A scenario that needs
// process control on a topology without it (NeedsLifecycleError) is skipped
// when the TB has Skipf (testing.T, GinkgoT()), else reported as a failure.
//
//	scenario.For(t, env).Dispatch(ctx, scenario.DispatchOptions{Jobs: 3})
//	scenario.Require(t, env).WorkerOutage(ctx, scenario.OutageOptions{})
//
// Every method returns the scenario's result (partial when it failed) and
// whether it passed.
type Runner struct {
	t      assert.TB
	h      helper // t's Helper, or a no-op
	fatalf func(format string, args ...any)
	env    *Env
}

// For returns a Runner that reports with t.Errorf.
func For(t assert.TB, env *Env) *Runner { return &Runner{t: t, h: helperOf(t), env: env} }

// Require returns a Runner that stops the test with t.Fatalf.
func Require(t assert.FatalTB, env *Env) *Runner {
	return &Runner{t: t, h: helperOf(t), fatalf: t.Fatalf, env: env}
}

// Env returns the Runner's Env.
func (r *Runner) Env() *Env { return r.env }

type helper interface{ Helper() }

type skipper interface {
	Skipf(format string, args ...any)
}

type noHelper struct{}

func (noHelper) Helper() {}

func helperOf(t assert.TB) helper {
	if h, ok := t.(helper); ok {
		return h
	}
	return noHelper{}
}

func (r *Runner) report(err error) bool {
	r.h.Helper()
	if err == nil {
		return true
	}
	var nl *NeedsLifecycleError
	if s, ok := r.t.(skipper); ok && errors.As(err, &nl) {
		s.Skipf("%v", err)
		return false
	}
	if r.fatalf != nil {
		r.fatalf("%v", err)
	} else {
		r.t.Errorf("%v", err)
	}
	return false
}
