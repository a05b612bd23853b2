// Package scenario composes topologies, workloads, the observer and the
// assertions into the canonical MultiKueue behaviours, each a function on
// any topology (local or attached) through an Env:
//
//	env, err := scenario.Observe(ctx, topo)
//	if err != nil { ... }
//	defer env.Close()
//	res, err := scenario.Dispatch(ctx, env, scenario.DispatchOptions{Jobs: 3})
//
// Each scenario has an error form (above: the error joins every failed
// check, each naming its cluster and object) and a TB form in the shape of
// assert.For and assert.Require:
//
//	scenario.For(t, env).Dispatch(ctx, scenario.DispatchOptions{Jobs: 3})   // t.Errorf
//	scenario.Require(t, env).WorkerOutage(ctx, scenario.OutageOptions{})    // t.Fatalf
//
// The scenarios: Setup (activation), Dispatch (every job kind the
// integrations enable, mixed), StatusSync (succeeding and failing jobs),
// AllAtOnce, Incremental and External (the dispatchers), Quota (balanced,
// under- and over-provisioned managers), WorkerOutage and ManagerRestart
// (resilience; they need Cluster.Lifecycle and return a NeedsLifecycleError
// without it, which the TB form turns into a skip), Disconnect (a lost
// worker on any provider: its connection cut, no Lifecycle), LoserCleanup (the
// MultiKueueWaitForWorkloadAdmitted gate), ScaleFromZero,
// WorkerOverProvisioned, Failover (HA) and Stress. Each takes its load as a
// DispatchOptions (the Dispatch field of its options) and each function's
// comment says what it checks. Scenarios judge topology-wide history from their own start, so
// several can share one topology.
//
// See ExampleDispatch for a whole program.
package scenario
