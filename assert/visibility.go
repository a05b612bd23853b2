package assert

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	visibility "sigs.k8s.io/kueue/apis/visibility/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// PendingQueue names the queue whose pending workloads PendingVisible asks
// for: a ClusterQueue, or a LocalQueue (Namespace and LocalQueue), on
// Cluster (default the manager).
type PendingQueue struct {
	Cluster      string
	ClusterQueue string
	Namespace    string
	LocalQueue   string
}

func (q PendingQueue) String() string {
	if q.LocalQueue != "" {
		return fmt.Sprintf("LocalQueue %s/%s on cluster %q", q.Namespace, q.LocalQueue, q.Cluster)
	}
	return fmt.Sprintf("ClusterQueue %s on cluster %q", q.ClusterQueue, q.Cluster)
}

// PendingVisible checks that every replica of the queue's cluster's Kueue,
// asked directly (each replica's own visibility server, not the API server's
// APIService routing, which reaches only one replica per request), lists the
// pending workloads of want — job objects or Workloads, resolved to their
// Workload names — exactly and in that order, through the
// visibility.kueue.x-k8s.io/v1beta2 pendingworkloads subresource, within
// Timeout. A replica that errs, answers empty, lists other workloads or
// another order fails it, named with what it answered. With no want, every
// replica must list nothing.
//
// It needs a provider implementing topology.ReplicaVisibility; it does not check the
// APIService itself, positions beyond the order, nor priorities.
func (c *Checker) PendingVisible(ctx context.Context, q PendingQueue, want ...client.Object) error {
	if q.Cluster == "" {
		q.Cluster = c.Topo.Manager.Name
	}
	fail := func(problems ...string) error {
		return c.fail(ctx, &Failure{Assertion: "PendingVisible", Object: q.String(),
			Expected: "every Kueue replica, asked directly, lists the queue's pending workloads in order", Problems: problems})
	}
	switch {
	case q.ClusterQueue == "" && q.LocalQueue == "":
		return fail("PendingQueue: set ClusterQueue, or Namespace and LocalQueue")
	case q.ClusterQueue != "" && q.LocalQueue != "":
		return fail("PendingQueue: set ClusterQueue or LocalQueue, not both")
	case q.LocalQueue != "" && q.Namespace == "":
		return fail("PendingQueue.Namespace: required with LocalQueue")
	}
	names := make([]string, 0, len(want))
	for _, obj := range want {
		t, err := c.resolveFor(ctx, "PendingVisible", obj)
		if err != nil {
			return err
		}
		names = append(names, t.namespace+"/"+t.workload)
	}
	expected := "every Kueue replica of cluster " + fmt.Sprintf("%q", q.Cluster) + ", asked directly, lists the pending workloads " + showNames(names) + " in this order"
	rv, ok := c.Topo.Provider().(topology.ReplicaVisibility)
	if !ok {
		return c.fail(ctx, &Failure{Assertion: "PendingVisible", Object: q.String(), Expected: expected,
			Problems: []string{fmt.Sprintf("provider %q cannot reach Kueue's replicas directly (it does not implement topology.ReplicaVisibility)", c.Topo.ProviderName)}})
	}
	cfgs, err := rv.VisibilityConfigs(q.Cluster)
	if err != nil {
		return c.fail(ctx, &Failure{Assertion: "PendingVisible", Object: q.String(), Expected: expected, Problems: []string{err.Error()}})
	}
	replicas := make([]string, 0, len(cfgs))
	clients := map[string]visibilityclient.Interface{}
	for name, cfg := range cfgs {
		cs, err := visibilityclient.NewForConfig(cfg)
		if err != nil {
			return c.fail(ctx, &Failure{Assertion: "PendingVisible", Object: q.String(), Expected: expected,
				Problems: []string{fmt.Sprintf("cluster %q: replica %s: %v", q.Cluster, name, err)}})
		}
		replicas = append(replicas, name)
		clients[name] = cs
	}
	slices.Sort(replicas)
	// problems are those of the last round whose requests all ended on
	// their own (not cut by the deadline of the wait).
	var problems []string
	err = poll.Until(ctx, c.timeout(), fmt.Sprintf("every replica of cluster %q to list %s", q.Cluster, showNames(names)), func(ctx context.Context) error {
		var round []string
		for _, name := range replicas {
			rctx, cancel := context.WithTimeout(ctx, visibilityRequestTimeout)
			got, err := pendingNames(rctx, clients[name], q)
			cancel()
			switch {
			case err != nil:
				round = append(round, fmt.Sprintf("cluster %q: replica %s (%s): the visibility request failed: %v", q.Cluster, name, cfgs[name].Host, err))
			case !slices.Equal(got, names):
				round = append(round, fmt.Sprintf("cluster %q: replica %s (%s) lists %s", q.Cluster, name, cfgs[name].Host, showNames(got)))
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		problems = round
		if len(round) > 0 {
			return fmt.Errorf("%s", strings.Join(round, "; "))
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if len(problems) == 0 {
		problems = []string{err.Error()}
	} else {
		problems = append(problems, fmt.Sprintf("(still so after %s)", c.timeout()))
	}
	return c.fail(ctx, &Failure{Assertion: "PendingVisible", Object: q.String(), Expected: expected, Problems: problems})
}

// visibilityRequestTimeout bounds one request to one replica: a replica
// that hangs is reported, not waited for.
const visibilityRequestTimeout = 2 * time.Second

// pendingNames asks one replica for the queue's pending workloads, in the
// order it lists them.
func pendingNames(ctx context.Context, cs visibilityclient.Interface, q PendingQueue) ([]string, error) {
	var (
		sum *visibility.PendingWorkloadsSummary
		err error
	)
	if q.LocalQueue != "" {
		sum, err = cs.VisibilityV1beta2().LocalQueues(q.Namespace).GetPendingWorkloadsSummary(ctx, q.LocalQueue, metav1.GetOptions{})
	} else {
		sum, err = cs.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, q.ClusterQueue, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(sum.Items))
	for _, it := range sum.Items {
		out = append(out, it.Namespace+"/"+it.Name)
	}
	return out, nil
}

func showNames(names []string) string {
	if len(names) == 0 {
		return "[] (nothing pending)"
	}
	return "[" + strings.Join(names, " ") + "]"
}

// PendingVisible reports Checker.PendingVisible.
func (a *Asserter) PendingVisible(ctx context.Context, q PendingQueue, want ...client.Object) bool {
	a.rep.Helper()
	return a.rep.Report(a.c.PendingVisible(ctx, q, want...))
}
