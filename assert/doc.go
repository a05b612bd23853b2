// Package assert holds the MultiKueue assertions. Each judges the recorded
// history of every cluster (package observe) and, where it must, the current
// state, and each exists in two forms:
//
//   - a method on Checker returning an error (nil when the assertion holds)
//     whose message tells the story: what was expected, what happened on which
//     cluster to which object, and a per-cluster timeline;
//
//   - the same method on Asserter, which reports through a minimal TB
//     (testing.T, GinkgoT(), testify's suite.T(), e2e-framework's *testing.T).
//
// For example:
//
//	chk := assert.New(topo, obs)
//	assert.For(t, chk).ExactlyOnceAdmitted(ctx, job) // t.Errorf, returns bool
//	assert.Require(t, chk).NoOrphans(ctx)            // t.Fatalf
//
// From Gomega: Expect(chk.NoOrphans(ctx)).To(Succeed()); from testify:
// require.NoError(t, chk.NoOrphans(ctx)).
//
// The assertions: SetupActive, ExactlyOnceAdmitted, PlacementRecorded,
// NominationCleared, LosersCleaned, StatusSynced, Finished, QuotaRespected,
// NoOrphans, ForeignUntouched, ClusterActive / ClusterInactive,
// WorkerCredentials, DispatchedIncrementally and PendingVisible. A worker's object counts as MultiKueue's remote
// copy only with the MultiKueue origin label, never by name alone (see
// foreign.go). Each method's
// comment states what it checks and what it does not. With $ARTIFACTS set, a
// failure also writes its report and a redacted dump of the objects involved,
// one file per cluster.
//
// Every assertion waits with a deadline for the state it needs
// (ForeignUntouched judges the history so far), never sleeps, and on
// failure names the cluster and the object. A wait for a workload is
// liveness: it gives up after Checker.Timeout with nothing progressing in
// the topology, or after Checker.MaxWait however busy it is.
package assert
