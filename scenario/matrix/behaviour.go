package matrix

import (
	"context"
	"errors"

	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
)

// Behaviour is one row: a scenario or a finding probe, the setup it runs
// on and what the library expects of it per Kueue version.
type Behaviour struct {
	// Name is the row's name, unique ("Dispatch/Job", "finding/foreign-same-name-job").
	Name string
	Kind Kind
	// Setup names the topology it runs on (Setups): behaviours of one
	// setup share one topology per target, in order.
	Setup string
	// Doc says in a line what it checks.
	Doc string
	// Expect, when set, gives the verdict the library expects on Kueue
	// version v and why (FixedIn, BrokenSince); "" for none.
	Expect func(v string) (Verdict, string)
	// Run runs it; nil means it passed. An *InapplicableError makes the
	// cell n/a.
	Run func(ctx context.Context, env *scenario.Env) error
}

// InapplicableError says why a behaviour does not apply to a topology.
type InapplicableError struct{ Why string }

func (e *InapplicableError) Error() string { return "not applicable: " + e.Why }

// Judge turns a behaviour's error into its verdict: nil passes; an
// InapplicableError or a scenario.NeedsLifecycleError is n/a; a failure on
// the test bed (scenario.Classify) is Infrastructure; anything else fails.
func Judge(err error) Verdict {
	var ie *InapplicableError
	var nl *scenario.NeedsLifecycleError
	switch {
	case err == nil:
		return Pass
	case errors.As(err, &ie), errors.As(err, &nl):
		return NotApplicable
	case scenario.Classify(err) == scenario.ClassInfrastructure:
		return Infrastructure
	}
	return Fail
}

// FixedIn is the expectation of a defect that Kueue fixed in release v:
// before v the probe fails (the defect shows), from v it passes.
func FixedIn(fixed, what string) func(string) (Verdict, string) {
	return threshold(fixed, Pass, what+": fixed in "+fixed, Fail, what+": the defect, fixed only in "+fixed)
}

// AddedIn is the expectation of a behaviour Kueue added in release v:
// before v it fails, from v it passes.
func AddedIn(added, what string) func(string) (Verdict, string) {
	return threshold(added, Pass, what+": from "+added, Fail, what+": added only in "+added)
}

// BrokenSince is the expectation of a defect that appeared in release v:
// from v the behaviour fails, before it passes.
func BrokenSince(since, what string) func(string) (Verdict, string) {
	return threshold(since, Fail, what+": seen from "+since, Pass, what+": not before "+since)
}

// threshold expects from, with fromWhy, on a Kueue at release at or
// later, and before, with beforeWhy, on an earlier one; nothing on a
// version it cannot compare.
func threshold(at string, from Verdict, fromWhy string, before Verdict, beforeWhy string) func(string) (Verdict, string) {
	return func(v string) (Verdict, string) {
		atLeast, known := topology.KueueFacts{Version: v}.VersionAtLeast(at)
		switch {
		case !known:
			return "", ""
		case atLeast:
			return from, fromWhy
		}
		return before, beforeWhy
	}
}
