package assert

import (
	"context"
	"fmt"
	"strings"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
)

// ClusterActive waits (up to Timeout) until the MultiKueueCluster name is
// Active=True according to the recorded history and the worker accepts the
// credentials MultiKueue uses for it, with every permission MultiKueue needs
// (as WorkerCredentials checks them). On failure it lists the cluster's
// Active transitions with their reasons and messages, and the refusals.
func (c *Checker) ClusterActive(ctx context.Context, name string) error {
	return c.clusterState(ctx, "ClusterActive", name, true, "")
}

// ClusterInactive waits (up to Timeout) until the MultiKueueCluster name is
// Active=False, with the given condition reason unless reason is empty (for
// example "BadKubeConfig" or "ClientConnectionFailed").
func (c *Checker) ClusterInactive(ctx context.Context, name, reason string) error {
	return c.clusterState(ctx, "ClusterInactive", name, false, reason)
}

func (c *Checker) clusterState(ctx context.Context, assertion, name string, active bool, reason string) error {
	mgr := c.Topo.Manager.Name
	want := "Active=True, and the worker accepting MultiKueue's credentials with every permission it needs"
	if !active {
		want = "Active=False"
		if reason != "" {
			want += " with reason " + reason
		}
	}
	var creds throttle[error]
	err := poll.Until(ctx, c.timeout(), fmt.Sprintf("cluster %q: MultiKueueCluster %s to be %s", mgr, name, want), func(context.Context) error {
		evs, _ := c.Obs.History(observe.KindMultiKueueCluster, "", name)
		var last *observe.Event
		for i := range evs {
			if evs[i].Type == observe.ClusterActive || evs[i].Type == observe.ClusterInactive {
				last = &evs[i]
			}
		}
		switch {
		case last == nil:
			return fmt.Errorf("no Active condition recorded")
		case active && last.Type == observe.ClusterActive:
			return c.clusterCredentialsError(ctx, name, &creds)
		case !active && last.Type == observe.ClusterInactive && (reason == "" || strings.Contains(last.Detail, "reason="+reason+" ")):
			return nil
		}
		return fmt.Errorf("last: %s %s", last.Type, last.Detail)
	})
	if err == nil {
		return nil
	}
	evs, _ := c.Obs.History(observe.KindMultiKueueCluster, "", name)
	problems := []string{err.Error()}
	if active {
		// Kueue v0.19 turns a cluster whose credentials the worker refuses
		// Inactive (ClientConnectionFailed), v0.17 keeps it Active: either
		// way, say what the worker makes of MultiKueue's credentials.
		if cerr := c.clusterCredentialsError(ctx, name, &throttle[error]{}); cerr != nil && !strings.Contains(err.Error(), cerr.Error()) {
			problems = append(problems, "cause: "+cerr.Error())
		}
	}
	return c.fail(ctx, &Failure{
		Assertion: assertion,
		Object:    fmt.Sprintf("MultiKueueCluster %s on cluster %q", name, mgr),
		Expected:  want,
		Problems:  problems,
		Timeline:  c.timeline(evs),
	})
}
