// Package scenario composes topologies, workloads, the observer and the
// assertions into the canonical MultiKueue behaviours, so that a test can say
// "dispatch 20 Jobs and prove each ran exactly once" in one call:
//
//	env, err := scenario.Observe(ctx, topo)
//	if err != nil { ... }
//	defer env.Close()
//	res, err := scenario.DispatchJobs(ctx, env, scenario.DispatchOptions{Jobs: 20})
//
// See ExampleDispatchJobs for the whole program.
package scenario
