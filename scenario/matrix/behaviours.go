package matrix

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
)

// CanonicalOptions shape the canonical behaviours.
type CanonicalOptions struct {
	// Kinds get a Dispatch row each; default batch/Job, JobSet and RayJob
	// (a kind the topology's integrations do not enable is n/a).
	Kinds []observe.Kind
	// StressJobs is the small Stress's load; default 30.
	StressJobs int
}

// Canonical is every canonical scenario and every finding probe, in the
// order they run (grouped by setup; within a setup the destructive ones
// last).
func Canonical(o CanonicalOptions) []Behaviour {
	if len(o.Kinds) == 0 {
		o.Kinds = []observe.Kind{observe.KindJob, observe.KindJobSet, observe.KindRayJob}
	}
	if o.StressJobs == 0 {
		o.StressJobs = 30
	}
	var bs []Behaviour
	add := func(b Behaviour) { bs = append(bs, b) }
	add(Behaviour{Name: "Setup", Kind: KindScenario, Setup: SetupAllAtOnce,
		Doc: "every MultiKueueCluster, the AdmissionCheck and the queues Active; MultiKueue's credentials accepted",
		Run: scenario.Setup})
	for _, k := range o.Kinds {
		add(Behaviour{Name: "Dispatch/" + string(k), Kind: KindScenario, Setup: SetupAllAtOnce,
			Doc: "3 " + string(k) + "s admitted exactly once, nominations cleared, losers cleaned, finished, status synced, nothing orphaned",
			Run: func(ctx context.Context, env *scenario.Env) error {
				if err := enabled(env, k); err != nil {
					return err
				}
				_, err := scenario.Dispatch(ctx, env, scenario.DispatchOptions{Jobs: 3, Kinds: []observe.Kind{k}, NamePrefix: "mx-dispatch-" + strings.ToLower(string(k))})
				return err
			}})
	}
	add(Behaviour{Name: "StatusSync", Kind: KindScenario, Setup: SetupAllAtOnce,
		Doc: "for every enabled kind a job that succeeds and one that fails: the manager's final status is the remote one",
		Run: runs(scenario.StatusSync, scenario.StatusSyncOptions{Dispatch: scenario.DispatchOptions{NamePrefix: "mx-statussync"}})})
	add(Behaviour{Name: "AllAtOnce", Kind: KindScenario, Setup: SetupAllAtOnce,
		Doc: "each workload's first nomination names every Active worker, each of which gets a copy",
		Run: runs(scenario.AllAtOnce, scenario.DispatchOptions{Jobs: 3, NamePrefix: "mx-allatonce"})})
	add(Behaviour{Name: "LoserCleanup", Kind: KindScenario, Setup: SetupAllAtOnce,
		Doc: "with admission held 3s on the workers: no losing copy removed before the winner is admitted (gate MultiKueueWaitForWorkloadAdmitted as run)",
		Run: runs(scenario.LoserCleanup, scenario.LoserCleanupOptions{Dispatch: scenario.DispatchOptions{Jobs: 2, NamePrefix: "mx-losers"}, HoldAdmission: 3 * time.Second})})
	add(Behaviour{Name: "Quota", Kind: KindScenario, Setup: SetupAllAtOnce,
		Doc: "more Jobs than fit: queued under exhaustion, quota respected on every cluster, every Job judged",
		Run: runs(scenario.Quota, scenario.QuotaOptions{Dispatch: scenario.DispatchOptions{NamePrefix: "mx-quota"}})})
	add(Behaviour{Name: "Stress", Kind: KindScenario, Setup: SetupAllAtOnce,
		Doc: fmt.Sprintf("%d Jobs at once, more than the quota admits: every per-workload assertion over each, quota respected, nothing orphaned", o.StressJobs),
		Run: runs(scenario.Stress, scenario.StressOptions{Dispatch: scenario.DispatchOptions{Jobs: o.StressJobs, NamePrefix: "mx-stress"}})})
	add(Behaviour{Name: "finding/final-status-dropped-while-suspended", Kind: KindFinding, Setup: SetupAllAtOnce,
		Doc:    "the remote Job finishes while the manager's Job is still suspended: the manager's Job still gets the final status (#11867)",
		Expect: FixedIn("v0.18.2", "the final status dropped while the manager's Job is suspended (kueue #11867, #12297 in v0.18.2)"),
		Run:    probeFinalStatusWhileSuspended})
	add(Behaviour{Name: "finding/foreign-same-name-job", Kind: KindFinding, Setup: SetupAllAtOnce,
		Doc:    "a worker's own Job with a manager Job's name, on a worker that loses: MultiKueue leaves it alone (#11849)",
		Expect: FixedIn("v0.18.2", "a worker's own Job of the manager Job's name deleted (kueue #11849, fixed by #11877 in v0.19.0 and its cherry-pick #12380 in v0.18.2)"),
		Run:    probeForeignSameNameJob})
	add(Behaviour{Name: "finding/out-of-sync-remote-finish", Kind: KindFinding, Setup: SetupAllAtOnce,
		Doc:    "the remote Job changed on its worker, so the worker's Kueue finishes its Workload OutOfSync: MultiKueue resets its check to dispatch again instead of finishing the manager's Workload (#13047)",
		Expect: FixedIn("v0.18.4", "a remote OutOfSync finish mirrored as the Job's end, the manager's Job stranded (kueue #13047 in v0.19.0, its cherry-pick #13086 in v0.18.4)"),
		Run:    probeOutOfSyncRemoteFinish})
	add(Behaviour{Name: "finding/redispatch-after-started", Kind: KindFinding, Setup: SetupAllAtOnce,
		Doc: "the same OutOfSync finish once the manager's Job shows the remote's active pods: the Job is dispatched again and runs to its end, status synced",
		Run: probeRedispatchAfterStarted})

	add(Behaviour{Name: "Incremental", Kind: KindScenario, Setup: SetupIncremental,
		Doc: "each workload's first round nominates the first workers in the order the version follows (config order from v0.19, else by name), every Dispatch check",
		Run: runs(scenario.Incremental, scenario.IncrementalOptions{Dispatch: scenario.DispatchOptions{Jobs: 4, NamePrefix: "mx-rounds"}})})

	add(Behaviour{Name: "Incremental/config-order", Kind: KindFeature, Setup: SetupIncremental,
		Doc:    "the Incremental dispatcher's first round is the first 3 workers of MultiKueueConfig.spec.clusters, not the first 3 by name",
		Expect: AddedIn("v0.19.0", "the Incremental dispatcher following spec.clusters order (gate MultiKueueIncrementalDispatcherRespectConfigOrder, on by default)"),
		Run:    probeIncrementalConfigOrder})

	add(Behaviour{Name: "External", Kind: KindScenario, Setup: SetupExternal,
		Doc: "an external dispatcher nominates one worker per workload in turn (server-side apply): every placement is its choice",
		Run: runs(scenario.External, scenario.ExternalOptions{Dispatch: scenario.DispatchOptions{Jobs: 4, NamePrefix: "mx-ext"}})})
	add(Behaviour{Name: "finding/merge-patched-nominations", Kind: KindFinding, Setup: SetupExternal,
		Doc:    "an external dispatcher that merge-patches status.nominatedClusterNames: MultiKueue still records the placement",
		Expect: FixedIn("v0.18.0", "a placement over merge-patched nominations never recorded (measured on v0.17.0 and v0.17.1; no changelog entry)"),
		Run:    probeMergePatchedNominations})

	add(Behaviour{Name: "ManagerRestart", Kind: KindScenario, Setup: SetupResilient,
		Doc:    "the manager's Kueue stopped mid-dispatch and started again: every Job resumed, admitted once, finished, synced",
		Expect: BrokenSince("v0.18.0", "Jobs waiting for dispatch when the manager's Kueue restarts are never dispatched (scenario.ErrNotResumed)"),
		Run:    runs(scenario.ManagerRestart, scenario.RestartOptions{Dispatch: scenario.DispatchOptions{NamePrefix: "mx-restart"}})})
	add(Behaviour{Name: "WorkerOutage", Kind: KindScenario, Setup: SetupResilient,
		Doc: "a worker's API server stopped with Jobs in flight: held, re-dispatched after workerLostTimeout, the worker's stale copies removed when it returns",
		Run: runs(scenario.WorkerOutage, scenario.OutageOptions{Dispatch: scenario.DispatchOptions{NamePrefix: "mx-outage"}})})
	add(Behaviour{Name: "Disconnect", Kind: KindScenario, Setup: SetupResilient,
		Doc: "a worker made unreachable without process control (the server in its kubeconfig Secret pointed at an unreachable address; the worker runs on): held, re-dispatched after workerLostTimeout, stale copies removed once restored",
		Run: runs(scenario.Disconnect, scenario.DisconnectOptions{Dispatch: scenario.DispatchOptions{NamePrefix: "mx-disconnect"}})})

	add(Behaviour{Name: "Failover", Kind: KindScenario, Setup: SetupHA,
		Doc:    "the manager's Kueue leader killed while Jobs arrive: a new leader takes over, every Job admitted once and finished, nothing orphaned",
		Expect: BrokenSince("v0.18.0", "Jobs waiting for dispatch when the leader is killed are never dispatched by the new leader (scenario.ErrNotResumed)"),
		Run:    runs(scenario.Failover, scenario.FailoverOptions{Dispatch: scenario.DispatchOptions{Jobs: 24, NamePrefix: "mx-failover"}})})
	return bs
}

// runs is a Behaviour's Run that runs scenario f with the options o, its
// result dropped.
func runs[O, R any](f func(context.Context, *scenario.Env, O) (R, error), o O) func(context.Context, *scenario.Env) error {
	return func(ctx context.Context, env *scenario.Env) error {
		_, err := f(ctx, env, o)
		return err
	}
}

// enabled says whether the topology's integrations enable kind k.
func enabled(env *scenario.Env, k observe.Kind) error {
	if slices.Contains(scenario.Kinds(env), k) {
		return nil
	}
	return &InapplicableError{Why: fmt.Sprintf("the topology's integrations %v do not enable %s", env.Topo.Facts.Integrations, k)}
}
