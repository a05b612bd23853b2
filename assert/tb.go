package assert

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TB is the part of testing.TB the assertions need: Errorf, as testify's
// TestingT. testing.T, GinkgoT(), testify suites and an Errorf-only value
// satisfy it. When the value also has Helper() (testing.T and GinkgoT() do),
// the Asserter calls it, so failures point at the test's line.
type TB interface {
	Errorf(format string, args ...any)
}

// FatalTB adds Fatalf, for Require.
type FatalTB interface {
	TB
	Fatalf(format string, args ...any)
}

// Reporter reports an error to a TB: with Errorf, or with Fatalf when made
// by RequireReporter, calling the TB's Helper when it has one. The
// Asserter and scenario.Runner report through it.
type Reporter struct {
	t      TB
	h      helper // t's Helper, or a no-op
	fatalf func(format string, args ...any)
}

// ReporterFor reports with t.Errorf.
func ReporterFor(t TB) Reporter { return Reporter{t: t, h: helperOf(t)} }

// RequireReporter reports with t.Fatalf.
func RequireReporter(t FatalTB) Reporter { return Reporter{t: t, h: helperOf(t), fatalf: t.Fatalf} }

// TB returns the TB reported to.
func (r Reporter) TB() TB { return r.t }

// Helper calls the TB's Helper, if it has one.
func (r Reporter) Helper() { r.h.Helper() }

// Report reports err, if any, and returns whether there was none. A
// Limitation is logged (when the TB has Logf), not reported, and counts as
// none.
func (r Reporter) Report(err error) bool {
	r.h.Helper()
	if err == nil {
		return true
	}
	if IsLimitation(err) {
		if l, ok := r.t.(interface{ Logf(string, ...any) }); ok {
			l.Logf("%v", err)
		}
		return true
	}
	if r.fatalf != nil {
		r.fatalf("%v", err)
	} else {
		r.t.Errorf("%v", err)
	}
	return false
}

// helper is the optional part of a TB.
type helper interface{ Helper() }

// noHelper stands in for a TB without Helper.
type noHelper struct{}

func (noHelper) Helper() {}

func helperOf(t TB) helper {
	if h, ok := t.(helper); ok {
		return h
	}
	return noHelper{}
}

// Asserter runs a Checker's assertions and reports failures to a TB.
type Asserter struct {
	rep Reporter
	c   *Checker
}

// For returns an Asserter that reports with t.Errorf and lets the test go on.
func For(t TB, c *Checker) *Asserter { return &Asserter{rep: ReporterFor(t), c: c} }

// Require returns an Asserter that stops the test with t.Fatalf.
func Require(t FatalTB, c *Checker) *Asserter {
	return &Asserter{rep: RequireReporter(t), c: c}
}

// SetupActive reports Checker.SetupActive.
func (a *Asserter) SetupActive(ctx context.Context) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.SetupActive(ctx))
}

// ExactlyOnceAdmitted reports Checker.ExactlyOnceAdmitted.
func (a *Asserter) ExactlyOnceAdmitted(ctx context.Context, job client.Object) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.ExactlyOnceAdmitted(ctx, job))
}

// NominationCleared reports Checker.NominationCleared.
func (a *Asserter) NominationCleared(ctx context.Context, job client.Object) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.NominationCleared(ctx, job))
}

// PlacementRecorded reports Checker.PlacementRecorded.
func (a *Asserter) PlacementRecorded(ctx context.Context, job client.Object) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.PlacementRecorded(ctx, job))
}

// Finished reports Checker.Finished.
func (a *Asserter) Finished(ctx context.Context, job client.Object) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.Finished(ctx, job))
}

// NoOrphans reports Checker.NoOrphans.
func (a *Asserter) NoOrphans(ctx context.Context) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.NoOrphans(ctx))
}

// LosersCleaned reports Checker.LosersCleaned.
func (a *Asserter) LosersCleaned(ctx context.Context, job client.Object) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.LosersCleaned(ctx, job))
}

// DispatchedIncrementally reports Checker.DispatchedIncrementally.
func (a *Asserter) DispatchedIncrementally(ctx context.Context, job client.Object) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.DispatchedIncrementally(ctx, job))
}

// ClusterActive reports Checker.ClusterActive.
func (a *Asserter) ClusterActive(ctx context.Context, name string) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.ClusterActive(ctx, name))
}

// ClusterInactive reports Checker.ClusterInactive.
func (a *Asserter) ClusterInactive(ctx context.Context, name, reason string) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.ClusterInactive(ctx, name, reason))
}

// StatusSynced reports Checker.StatusSynced.
func (a *Asserter) StatusSynced(ctx context.Context, job client.Object) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.StatusSynced(ctx, job))
}

// QuotaRespected reports Checker.QuotaRespected.
func (a *Asserter) QuotaRespected(ctx context.Context) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.QuotaRespected(ctx))
}
