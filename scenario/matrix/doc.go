// Package matrix measures which MultiKueue behaviours hold in which Kueue
// release: for each Kueue (a version from the module proxy or a checkout)
// it starts fresh local topologies, runs every canonical scenario and every
// finding probe (a known Kueue defect the library reproduces for real) and
// writes the table, behaviour × version, as matrix.json (schema
// multikueue-testkit/matrix/v1, schema.json embedded), matrix.md and
// matrix.html, each cell linking to its report.
//
// A cell is pass, fail, n/a (the behaviour does not apply: a kind the
// integrations do not enable, a scenario not built) or infrastructure (the
// test bed failed, not MultiKueue: scenario.Classify). A cell comes only
// from a run on that version. Where the library expects a verdict per
// version (a finding fixed in a release, a regression since one; read from
// Kueue's changelogs and earlier runs), the expectation is recorded beside
// the measured verdict and a difference is reported as a mismatch: the
// expectation is never the verdict.
//
// Run does the runs; Build makes the table from recorded Outcomes (no
// clusters: it is what the unit tests exercise); Write renders it.
// `mktk matrix` is the command line.
package matrix
