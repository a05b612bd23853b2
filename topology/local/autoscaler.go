package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Autoscaler grows and shrinks a worker's KWOK Nodes as a cluster
// autoscaler grows a node pool (a CAPZ MachinePool with min 0 on AKS): the
// worker starts with Min Nodes; while pods stay unschedulable for Delay,
// it adds the Nodes their requests need (up to Max); a Node above Min
// that has run no pod for IdleAfter is removed. It runs in the test
// process with a client identity of its own (mktk-autoscaler), so
// timelines and audit logs name it.
type Autoscaler struct {
	// Min and Max Nodes; Max default 10. Min may be 0.
	Min, Max int
	// Delay from a pod first seen unschedulable to the Node create (the
	// VM's provisioning); default 5 s.
	Delay time.Duration
	// IdleAfter removes a Node above Min that has had no running or
	// pending pod for that long; default 30 s.
	IdleAfter time.Duration
}

func (a Autoscaler) withDefaults() (Autoscaler, error) {
	if a.Max == 0 {
		a.Max = 10
	}
	if a.Delay == 0 {
		a.Delay = 5 * time.Second
	}
	if a.IdleAfter == 0 {
		a.IdleAfter = 30 * time.Second
	}
	switch {
	case a.Min < 0:
		return a, fmt.Errorf("local: Options.Nodes.Autoscaler.Min: %d is negative", a.Min)
	case a.Max < a.Min || a.Max < 1:
		return a, fmt.Errorf("local: Options.Nodes.Autoscaler.Max: %d is below Min %d or 1", a.Max, a.Min)
	case a.Delay < 0 || a.IdleAfter < 0:
		return a, fmt.Errorf("local: Options.Nodes.Autoscaler: Delay %s and IdleAfter %s must not be negative", a.Delay, a.IdleAfter)
	}
	return a, nil
}

// autoscalerUser is the simulated autoscaler's client identity.
const autoscalerUser = "mktk-autoscaler"

// autoscalerTick is how often the autoscaler reads the worker's pods and
// Nodes.
const autoscalerTick = 250 * time.Millisecond

// autoscaler is one worker's running Autoscaler.
type autoscaler struct {
	cluster string
	cfg     Autoscaler
	client  client.Client
	// template is a Node of the pool; each new one gets the next index.
	template *corev1.Node
	log      *os.File

	pendingSince time.Time
	idleSince    map[string]time.Time
}

// run scales the pool until ctx ends; done is closed on return.
func (a *autoscaler) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	defer a.log.Close()
	t := time.NewTicker(autoscalerTick)
	defer t.Stop()
	for {
		if err := a.step(ctx, time.Now()); err != nil && ctx.Err() == nil {
			fmt.Fprintf(a.log, "%s cluster %q: %v\n", time.Now().Format(time.RFC3339Nano), a.cluster, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// step reads the pool and the pods once and adds or removes Nodes.
func (a *autoscaler) step(ctx context.Context, now time.Time) error {
	var nodes corev1.NodeList
	if err := a.client.List(ctx, &nodes, client.MatchingLabels{poolLabel: a.template.Labels[poolLabel]}); err != nil {
		return fmt.Errorf("list Nodes: %w", err)
	}
	var pods corev1.PodList
	if err := a.client.List(ctx, &pods); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	busy := map[string]bool{}
	var unschedulable, bound []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if p.Spec.NodeName != "" {
			busy[p.Spec.NodeName] = true
			bound = append(bound, p)
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				unschedulable = append(unschedulable, p)
			}
		}
	}
	if len(unschedulable) == 0 {
		a.pendingSince = time.Time{}
	} else if a.pendingSince.IsZero() {
		a.pendingSince = now
	}
	have := len(nodes.Items)
	if len(unschedulable) > 0 && now.Sub(a.pendingSince) >= a.cfg.Delay && have < a.cfg.Max {
		if k := a.needed(unschedulable, bound, have); k > 0 {
			if err := a.add(ctx, nodes.Items, min(a.cfg.Max, have+k)-have); err != nil {
				return err
			}
			a.pendingSince = now // the next Nodes, if still needed, after another Delay
			return nil
		}
	}
	// Idle Nodes above Min go, the newest first.
	slices.SortFunc(nodes.Items, func(x, y corev1.Node) int { return nodeIndex(y.Name) - nodeIndex(x.Name) })
	for _, n := range nodes.Items {
		if busy[n.Name] {
			delete(a.idleSince, n.Name)
			continue
		}
		if _, ok := a.idleSince[n.Name]; !ok {
			a.idleSince[n.Name] = now
		}
	}
	for _, n := range nodes.Items {
		since, idle := a.idleSince[n.Name]
		if have <= a.cfg.Min || !idle || now.Sub(since) < a.cfg.IdleAfter {
			continue
		}
		if err := a.client.Delete(ctx, &n); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete idle Node %s: %w", n.Name, err)
		}
		fmt.Fprintf(a.log, "%s cluster %q: removed Node %s, idle for %s\n", now.Format(time.RFC3339Nano), a.cluster, n.Name, now.Sub(since).Round(time.Millisecond))
		delete(a.idleSince, n.Name)
		have--
	}
	return nil
}

// needed is how many more Nodes of the template the unschedulable pods'
// requests need, after what the pool's have Nodes hold beyond the bound
// pods' requests (the scheduler places pods there once it retries, as a
// cluster autoscaler counts upcoming Nodes); fragmentation is not modelled.
func (a *autoscaler) needed(unschedulable, bound []corev1.Pod, have int) int {
	n := 0
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		alloc := a.template.Status.Allocatable[name]
		if alloc.IsZero() {
			continue
		}
		want := requested(unschedulable, name)
		free := alloc.MilliValue()*int64(have) - requested(bound, name)
		if excess := want - max(free, 0); excess > 0 {
			n = max(n, int((excess+alloc.MilliValue()-1)/alloc.MilliValue()))
		}
	}
	return n
}

// requested sums the pods' container requests of a resource, in milli-units.
func requested(pods []corev1.Pod, name corev1.ResourceName) int64 {
	var sum int64
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Requests[name]; ok {
				sum += q.MilliValue()
			}
		}
	}
	return sum
}

// add creates k Nodes after the highest index in the pool.
func (a *autoscaler) add(ctx context.Context, pool []corev1.Node, k int) error {
	next := 0
	for _, n := range pool {
		next = max(next, nodeIndex(n.Name)+1)
	}
	var errs []error
	for i := range k {
		n := poolNode(a.template, next+i)
		if err := a.client.Create(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("create Node %s: %w", n.Name, err))
			continue
		}
		fmt.Fprintf(a.log, "%s cluster %q: added Node %s for unschedulable pods\n", time.Now().Format(time.RFC3339Nano), a.cluster, n.Name)
	}
	return errors.Join(errs...)
}

// poolLabel marks the Nodes of a worker's pool; its value is the worker.
const poolLabel = "testkit.multikueue.x-k8s.io/node-pool"

// poolNode is the template as the pool's Node number i:
// <worker>-node-<i>.
func poolNode(template *corev1.Node, i int) *corev1.Node {
	n := template.DeepCopy()
	n.Name = fmt.Sprintf("%s-node-%d", template.Labels[poolLabel], i)
	n.Labels[corev1.LabelHostname] = n.Name
	return n
}

// startAutoscaler runs the worker's autoscaler until the cluster closes.
func (lc *localCluster) startAutoscaler(p *pool) error {
	cl, err := client.New(lc.cp.configAs(lc.cp.autoscalerID), client.Options{})
	if err != nil {
		return fmt.Errorf("cluster %q: autoscaler client: %w", lc.name, err)
	}
	logf, err := os.OpenFile(lc.cp.file("autoscaler.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &autoscaler{cluster: lc.name, cfg: *p.scaler, client: cl, template: p.template, log: logf, idleSince: map[string]time.Time{}}
	done := make(chan error)
	lc.mu.Lock()
	lc.components = append(lc.components, &component{name: "autoscaler", cancel: cancel, done: done})
	lc.mu.Unlock()
	go func() {
		stopped := make(chan struct{})
		a.run(ctx, stopped)
		<-stopped
		close(done)
	}()
	return nil
}

// nodeIndex is the number at the end of a pool Node's name, -1 if none.
func nodeIndex(name string) int {
	i := strings.LastIndexByte(name, '-')
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return -1
	}
	return n
}
