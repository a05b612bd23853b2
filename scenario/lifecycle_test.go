package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
)

// recorder is a TB that records what it is told.
type recorder struct {
	errors, fatals, skips []string
}

func (r *recorder) Errorf(f string, a ...any) { r.errors = append(r.errors, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.fatals = append(r.fatals, fmt.Sprintf(f, a...)) }
func (r *recorder) Skipf(f string, a ...any)  { r.skips = append(r.skips, fmt.Sprintf(f, a...)) }

// errorsOnly is a TB that cannot skip.
type errorsOnly struct{ errors []string }

func (r *errorsOnly) Errorf(f string, a ...any) { r.errors = append(r.errors, fmt.Sprintf(f, a...)) }

// noLifecycle is an Env over clusters whose provider cannot stop them (as
// existing clusters): the scenarios that need process control refuse before
// touching a cluster.
func noLifecycle() *scenario.Env {
	c := func(name string, role topology.Role) *topology.Cluster {
		return &topology.Cluster{Name: name, Role: role, Config: &rest.Config{Host: "https://127.0.0.1:1"}}
	}
	topo := &topology.Topology{Manager: c("manager", topology.RoleManager), Workers: []*topology.Cluster{c("w1", topology.RoleWorker), c("w2", topology.RoleWorker)},
		ProviderName: "existing"}
	topo.Spec.WorkerNames = []string{"w1", "w2"}
	obs := &observe.Observer{}
	return &scenario.Env{Topo: topo, Obs: obs, Check: assert.New(topo, obs)}
}

func TestScenariosNeedingLifecycleSayWhyOrSkip(t *testing.T) {
	ctx := context.Background()
	env := noLifecycle()
	_, err := scenario.WorkerOutage(ctx, env, scenario.OutageOptions{})
	var nl *scenario.NeedsLifecycleError
	if !errors.As(err, &nl) || nl.Cluster != "w1" || !strings.Contains(err.Error(), `provider "existing" cannot stop and start its processes`) {
		t.Errorf("WorkerOutage: %v, want a NeedsLifecycleError naming w1 and the provider", err)
	}
	_, err = scenario.ManagerRestart(ctx, env, scenario.RestartOptions{})
	if !errors.As(err, &nl) || nl.Cluster != "manager" {
		t.Errorf("ManagerRestart: %v, want a NeedsLifecycleError naming the manager", err)
	}
	_, err = scenario.WorkerOutage(ctx, env, scenario.OutageOptions{Worker: "nope"})
	if err == nil || !strings.Contains(err.Error(), `OutageOptions.Worker: "nope" is not a worker`) {
		t.Errorf("WorkerOutage with an unknown worker: %v", err)
	}

	rec := &recorder{}
	scenario.For(rec, env).WorkerOutage(ctx, scenario.OutageOptions{})
	scenario.Require(rec, env).ManagerRestart(ctx, scenario.RestartOptions{})
	if len(rec.skips) != 2 || len(rec.errors)+len(rec.fatals) != 0 {
		t.Errorf("a TB that can skip: skips %q, errors %q, fatals %q; want 2 skips", rec.skips, rec.errors, rec.fatals)
	}
	eo := &errorsOnly{}
	scenario.For(eo, env).WorkerOutage(ctx, scenario.OutageOptions{})
	if len(eo.errors) != 1 || !strings.Contains(eo.errors[0], "has no Lifecycle") {
		t.Errorf("a TB that cannot skip: errors %q, want the NeedsLifecycleError", eo.errors)
	}
}
