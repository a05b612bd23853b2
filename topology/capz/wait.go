package capz

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/poll"
)

// clusterState is what Provision knows about one Cluster while it waits.
type clusterState struct {
	conditions map[string]metav1.Condition
	kubeconfig bool
	pools      []poolState
}

type poolState struct {
	pool   MachinePool
	object string // the MachinePool's name; "" when CAPI has not made it yet
	ready  int32
}

// missing lists what keeps the Cluster from being ready, each naming the
// condition, Secret or MachinePool; empty when ready.
func (s clusterState) missing(namespace, cluster string) []string {
	var out []string
	for _, t := range ReadyConditions() {
		c, ok := s.conditions[t]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("condition %s not reported", t))
		case c.Status != metav1.ConditionTrue:
			out = append(out, fmt.Sprintf("condition %s is %s (%s)", t, c.Status, reasonOf(c)))
		}
	}
	if !s.kubeconfig {
		out = append(out, fmt.Sprintf("Secret %s/%s not found", namespace, KubeconfigSecretName(cluster)))
	}
	for _, p := range s.pools {
		switch {
		case p.object == "":
			out = append(out, fmt.Sprintf("no MachinePool for topology pool %s yet", p.pool.Name))
		case p.ready < p.pool.wanted():
			out = append(out, fmt.Sprintf("MachinePool %s (pool %s): %d of %d replicas ready", p.object, p.pool.Name, p.ready, p.pool.wanted()))
		}
	}
	return out
}

func reasonOf(c metav1.Condition) string {
	if c.Message == "" {
		return c.Reason
	}
	return c.Reason + ": " + c.Message
}

// summary is the one-line state printed when it changes.
func (s clusterState) summary() string {
	var parts []string
	for _, t := range ReadyConditions() {
		st := "?"
		if c, ok := s.conditions[t]; ok {
			st = string(c.Status)
		}
		parts = append(parts, t+"="+st)
	}
	kc := "no"
	if s.kubeconfig {
		kc = "yes"
	}
	parts = append(parts, "kubeconfig="+kc)
	for _, p := range s.pools {
		got := "-"
		if p.object != "" {
			got = fmt.Sprint(p.ready)
		}
		parts = append(parts, fmt.Sprintf("%s=%s/%d", p.pool.Name, got, p.pool.wanted()))
	}
	return strings.Join(parts, " ")
}

// readState reads one Cluster's conditions, kubeconfig Secret and
// MachinePools. A Cluster that is gone or being deleted stops the wait.
func readState(ctx context.Context, c client.Client, namespace, name string, pools []MachinePool) (clusterState, error) {
	st := clusterState{conditions: map[string]metav1.Condition{}}
	u := newObject(ClusterGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return st, poll.Stop(fmt.Errorf("Cluster %s/%s is gone", namespace, name))
		}
		return st, err
	}
	if u.GetDeletionTimestamp() != nil {
		return st, poll.Stop(fmt.Errorf("Cluster %s/%s is being deleted", namespace, name))
	}
	var cs clusterStatus
	if err := statusOf(u, &cs); err != nil {
		return st, poll.Stop(err)
	}
	for _, cond := range cs.Conditions {
		st.conditions[cond.Type] = cond
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: KubeconfigSecretName(name)}, &corev1.Secret{})
	switch {
	case err == nil:
		st.kubeconfig = true
	case !apierrors.IsNotFound(err):
		return st, err
	}
	mps := newList(MachinePoolGVK)
	if err := c.List(ctx, mps, client.InNamespace(namespace), client.MatchingLabels{LabelClusterName: name}); err != nil {
		return st, err
	}
	for _, p := range pools {
		ps := poolState{pool: p}
		for i := range mps.Items {
			mp := &mps.Items[i]
			if mp.GetLabels()[LabelTopologyPool] != p.Name || mp.GetDeletionTimestamp() != nil {
				continue
			}
			var ms machinePoolStatus
			if err := statusOf(mp, &ms); err != nil {
				return st, poll.Stop(err)
			}
			ps.object = mp.GetName()
			if ms.ReadyReplicas != nil {
				ps.ready = *ms.ReadyReplicas
			}
		}
		st.pools = append(st.pools, ps)
	}
	return st, nil
}

// waitReady waits until the Cluster is ready, printing its state whenever it
// changes. The error names the Cluster and everything still missing.
func (p *Provider) waitReady(ctx context.Context, name string, pools []MachinePool, timeout time.Duration, start time.Time) error {
	ns := p.o.Namespace
	what := fmt.Sprintf("Cluster %s/%s on management cluster %q to be ready (%s; kubeconfig Secret; MachinePools' ready replicas)", ns, name, p.o.Management.Name, strings.Join(ReadyConditions(), ", "))
	last := ""
	err := poll.UntilEvery(ctx, timeout, p.o.PollInterval, what, func(ctx context.Context) error {
		st, err := readState(ctx, p.mgmt, ns, name, pools)
		if err != nil {
			return err
		}
		if s := st.summary(); s != last {
			last = s
			fmt.Fprintf(p.progress, "capz: Cluster %s/%s: %s (+%s)\n", ns, name, s, time.Since(start).Round(time.Second))
		}
		if m := st.missing(ns, name); len(m) > 0 {
			return fmt.Errorf("%s", strings.Join(m, "; "))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("capz: %w", err)
	}
	return nil
}

// remaining lists the created Clusters still on the management cluster,
// each with its deletion state.
func (p *Provider) remaining(ctx context.Context, created []createdCluster) ([]string, error) {
	var left []string
	for _, cc := range created {
		u := newObject(ClusterGVK)
		err := p.mgmt.Get(ctx, client.ObjectKey{Namespace: p.o.Namespace, Name: cc.name}, u)
		if apierrors.IsNotFound(err) || (err == nil && u.GetUID() != cc.uid) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var cs clusterStatus
		_ = statusOf(u, &cs)
		desc := fmt.Sprintf("Cluster %s/%s", p.o.Namespace, cc.name)
		var details []string
		if ts := u.GetDeletionTimestamp(); ts != nil {
			details = append(details, "deleting since "+ts.UTC().Format(time.RFC3339))
		} else {
			details = append(details, "not deleting")
		}
		if cs.Phase != "" {
			details = append(details, "phase "+cs.Phase)
		}
		if f := u.GetFinalizers(); len(f) > 0 {
			details = append(details, "finalizers "+fmt.Sprint(slices.Sorted(slices.Values(f))))
		}
		left = append(left, desc+" ("+strings.Join(details, ", ")+")")
	}
	return left, nil
}
