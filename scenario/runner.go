package scenario

import (
	"context"
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
	rep assert.Reporter
	env *Env
}

// For returns a Runner that reports with t.Errorf.
func For(t assert.TB, env *Env) *Runner { return &Runner{rep: assert.ReporterFor(t), env: env} }

// Require returns a Runner that stops the test with t.Fatalf.
func Require(t assert.FatalTB, env *Env) *Runner {
	return &Runner{rep: assert.RequireReporter(t), env: env}
}

// Env returns the Runner's Env.
func (r *Runner) Env() *Env { return r.env }

type skipper interface {
	Skipf(format string, args ...any)
}

// reported runs scenario f with the options o on the Runner's Env and
// reports its error.
func reported[O, R any](r *Runner, ctx context.Context, f func(context.Context, *Env, O) (R, error), o O) (R, bool) {
	r.rep.Helper()
	res, err := f(ctx, r.env, o)
	return res, r.report(err)
}

func (r *Runner) report(err error) bool {
	r.rep.Helper()
	var nl *NeedsLifecycleError
	if s, ok := r.rep.TB().(skipper); ok && errors.As(err, &nl) {
		s.Skipf("%v", err)
		return false
	}
	return r.rep.Report(err)
}
