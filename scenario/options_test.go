package scenario_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
)

// TestScenarioOptionsShareOneLoad: every scenario takes its load as a
// DispatchOptions, refuses a field it would ignore with an error naming
// the field and why, and checks the shared fields under its own name; all
// before touching a cluster (the Env's clusters are unreachable).
func TestScenarioOptionsShareOneLoad(t *testing.T) {
	ctx := context.Background()
	env := noLifecycle()
	kinds := []observe.Kind{observe.KindJobSet}
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"Quota", func() error {
			_, err := scenario.Quota(ctx, env, scenario.QuotaOptions{Dispatch: scenario.DispatchOptions{Kinds: kinds}})
			return err
		}, "scenario Quota: QuotaOptions.Dispatch.Kinds: Quota does not use it (it submits batch/Jobs only)"},
		{"ManagerRestart", func() error {
			_, err := scenario.ManagerRestart(ctx, env, scenario.RestartOptions{Dispatch: scenario.DispatchOptions{Fails: true}})
			return err
		}, "RestartOptions.Dispatch.Fails: ManagerRestart does not use it"},
		{"WorkerOutage", func() error {
			_, err := scenario.WorkerOutage(ctx, env, scenario.OutageOptions{Dispatch: scenario.DispatchOptions{Kinds: kinds}})
			return err
		}, "OutageOptions.Dispatch.Kinds: WorkerOutage does not use it"},
		{"Disconnect", func() error {
			_, err := scenario.Disconnect(ctx, env, scenario.DisconnectOptions{Dispatch: scenario.DispatchOptions{Kinds: kinds}})
			return err
		}, "DisconnectOptions.Dispatch.Kinds: Disconnect does not use it"},
		{"Disconnect Worker", func() error {
			_, err := scenario.Disconnect(ctx, env, scenario.DisconnectOptions{Worker: "nope"})
			return err
		}, `DisconnectOptions.Worker: "nope" is not a worker of the topology`},
		{"ScaleFromZero", func() error {
			_, err := scenario.ScaleFromZero(ctx, env, scenario.ScaleFromZeroOptions{Dispatch: scenario.DispatchOptions{Jobs: -1}})
			return err
		}, "ScaleFromZeroOptions.Dispatch.Jobs: -1 is negative"},
		{"StatusSync", func() error {
			_, err := scenario.StatusSync(ctx, env, scenario.StatusSyncOptions{Dispatch: scenario.DispatchOptions{Jobs: 3}})
			return err
		}, "StatusSyncOptions.Dispatch.Jobs: StatusSync does not use it (it submits one job that succeeds and one that fails of each kind)"},
		{"WorkerOverProvisioned", func() error {
			_, err := scenario.WorkerOverProvisioned(ctx, env, scenario.WorkerOverProvisionedOptions{Dispatch: scenario.DispatchOptions{RunFor: time.Second}})
			return err
		}, "WorkerOverProvisionedOptions.Dispatch.RunFor: WorkerOverProvisioned does not use it"},
		{"Stress", func() error {
			_, err := scenario.Stress(ctx, env, scenario.StressOptions{Dispatch: scenario.DispatchOptions{Fails: true}})
			return err
		}, "StressOptions.Dispatch.Fails: Stress does not use it"},
		{"Stress StartTimeout", func() error {
			_, err := scenario.Stress(ctx, env, scenario.StressOptions{Dispatch: scenario.DispatchOptions{StartTimeout: time.Minute}})
			return err
		}, "StressOptions.Dispatch.StartTimeout: Stress does not use it (its waits are bounded by the Checker's Timeout)"},
		{"Dispatch CPU", func() error {
			_, err := scenario.Dispatch(ctx, env, scenario.DispatchOptions{CPU: "lots"})
			return err
		}, `DispatchOptions.CPU: "lots" is not a non-negative quantity`},
		{"Stress prefix", func() error {
			_, err := scenario.Stress(ctx, env, scenario.StressOptions{Dispatch: scenario.DispatchOptions{NamePrefix: "Not_A_Name"}})
			return err
		}, "StressOptions.Dispatch.NamePrefix"},
		{"Failover", func() error {
			_, err := scenario.Failover(ctx, env, scenario.FailoverOptions{Dispatch: scenario.DispatchOptions{StartTimeout: time.Second}})
			return err
		}, "FailoverOptions.Dispatch.StartTimeout: Failover does not use it"},
		{"Failover StopAfter", func() error {
			_, err := scenario.Failover(ctx, env, scenario.FailoverOptions{Dispatch: scenario.DispatchOptions{Jobs: 4}, StopAfter: 5})
			return err
		}, "FailoverOptions.StopAfter: 5; want 1 to Dispatch.Jobs (4)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
