package local

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// Nodes puts Nodes on every worker, as a cluster has them: KWOK Nodes
// (sigs.k8s.io/kwok: fake Nodes that a KWOK controller process keeps Ready
// and whose bound pods it moves through its Stages), kube-scheduler to bind
// pods to them and kube-controller-manager's Job controller to create the
// pods. A Job then runs as on a cluster: its pods are scheduled, run for
// their run duration (topology.AnnotationRunDuration) and end Succeeded, or
// Failed with exit code 1 (topology.AnnotationOutcome); the Job controller
// writes the Job's status. Pods that fit no Node stay Pending. Every worker
// has them; the zero value is one Node holding the worker's quota.
type Nodes struct {
	// Count of Nodes per worker; default 1.
	Count int
	// CPU and Memory each Node can allocate; default the worker's
	// ClusterQueue quota divided by Count (so that the Nodes hold what the
	// quota admits).
	CPU, Memory string
	// Pods each Node can allocate; default 110, a kubelet's.
	Pods int
	// Labels added to each Node (topology labels for TAS, for instance).
	Labels map[string]string
	// Taints of each Node.
	Taints []corev1.Taint
	// Autoscaler, when set, makes the worker's Nodes a pool that starts
	// with Autoscaler.Min (0 allowed) and grows while pods are
	// unschedulable; Count is then unused, and each Node holds the worker's
	// quota unless CPU and Memory say otherwise.
	Autoscaler *Autoscaler
}

// kwokNodeAnnotation marks the Nodes the KWOK controller manages
// (--manage-nodes-with-annotation-selector), as KWOK's own examples do.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// template is the Node n makes for a worker whose quota is quota, named
// as its number 0; pool gives the rest.
func (n Nodes) template(worker string, quota corev1.ResourceList) (*corev1.Node, error) {
	count := n.Count
	if n.Autoscaler != nil {
		// One Node holds what the quota admits: a pool grows by whole
		// Nodes, and a job that fits the quota must fit one.
		count = 1
	}
	if count == 0 {
		count = 1
	}
	if count < 0 {
		return nil, fmt.Errorf("local: Options.Nodes.Count: %d is negative", count)
	}
	pods := n.Pods
	switch {
	case pods < 0:
		return nil, fmt.Errorf("local: Options.Nodes.Pods: %d is negative", pods)
	case pods == 0:
		pods = 110
	}
	alloc := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(pods), resource.DecimalSI)}
	for _, x := range []struct {
		name  corev1.ResourceName
		field string
		val   string
	}{{corev1.ResourceCPU, "CPU", n.CPU}, {corev1.ResourceMemory, "Memory", n.Memory}} {
		if x.val != "" {
			q, err := resource.ParseQuantity(x.val)
			if err != nil || q.Sign() < 0 {
				return nil, fmt.Errorf("local: Options.Nodes.%s: %q is not a non-negative quantity", x.field, x.val)
			}
			alloc[x.name] = q
			continue
		}
		q, ok := quota[x.name]
		if !ok {
			return nil, fmt.Errorf("local: Options.Nodes.%s: worker %q has no %s quota to size the Nodes by; set it", x.field, worker, x.name)
		}
		alloc[x.name] = *resource.NewMilliQuantity(q.MilliValue()/int64(count), q.Format)
	}
	labels := map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", "type": "kwok"}
	maps.Copy(labels, n.Labels)
	labels[poolLabel] = worker
	return poolNode(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{kwokNodeAnnotation: "fake"}},
		Spec:       corev1.NodeSpec{Taints: n.Taints},
		Status:     corev1.NodeStatus{Allocatable: alloc, Capacity: alloc},
	}, 0), nil
}

// initial is how many Nodes a worker starts with.
func (n Nodes) initial() int {
	switch {
	case n.Autoscaler != nil:
		return n.Autoscaler.Min
	case n.Count == 0:
		return 1
	}
	return n.Count
}

// createNodes creates the worker's Nodes and waits until the KWOK controller made each
// Ready.
func createNodes(ctx context.Context, c *topology.Cluster, nodes []*corev1.Node, timeout time.Duration) error {
	for _, n := range nodes {
		// As a kubelet registers its Node: the status (capacity,
		// allocatable) is part of the create; KWOK keeps it.
		if err := c.Client.Create(ctx, n.DeepCopy()); err != nil {
			return fmt.Errorf("cluster %q: create Node %s: %w", c.Name, n.Name, err)
		}
	}
	return poll.Until(ctx, timeout, fmt.Sprintf("cluster %q: the KWOK controller to make %d Node(s) Ready", c.Name, len(nodes)), func(ctx context.Context) error {
		for _, n := range nodes {
			got := &corev1.Node{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: n.Name}, got); err != nil {
				return err
			}
			ready := false
			for _, cond := range got.Status.Conditions {
				ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
			}
			if !ready {
				return fmt.Errorf("Node %s is not Ready", n.Name)
			}
		}
		return nil
	})
}

// nodeSetup is what Options.Nodes and WorkerNodes need: the binaries and
// each worker's pool.
type nodeSetup struct {
	scheduler string
	kwok      assets.Operator
	pools     map[string]*pool
}

// pool is one worker's Nodes: the Node template, how many it starts with
// and its autoscaler, if any.
type pool struct {
	template *corev1.Node
	initial  int
	scaler   *Autoscaler
}

// nodes are the pool's first Nodes.
func (p *pool) nodes() []*corev1.Node {
	out := make([]*corev1.Node, p.initial)
	for i := range out {
		out[i] = poolNode(p.template, i)
	}
	return out
}

// KWOKVersion is the KWOK controller the local topology runs with
// Options.Nodes.
const KWOKVersion = "v0.8.0"

// prepareNodes finds or builds kube-scheduler (of the topology's Kubernetes
// version) and the KWOK controller, and makes each worker's Nodes.
func prepareNodes(ctx context.Context, ao assets.Options, o Options, spec topology.Spec) (*nodeSetup, error) {
	for name := range o.WorkerNodes {
		if !slices.Contains(spec.WorkerNames, name) {
			return nil, fmt.Errorf("local: Options.WorkerNodes[%q]: no worker has that name", name)
		}
	}
	ns := &nodeSetup{pools: map[string]*pool{}}
	for _, w := range spec.WorkerNames {
		n, ok := o.WorkerNodes[w]
		if !ok && o.Nodes != nil {
			n = *o.Nodes
		}
		if spec.TAS != nil {
			// The TAS flavor's Nodes: its node labels on every Node.
			labels := maps.Clone(spec.TAS.WithDefaults().NodeLabels)
			maps.Copy(labels, n.Labels)
			n.Labels = labels
		}
		tmpl, err := n.template(w, spec.Quotas[w])
		if err != nil {
			return nil, err
		}
		p := &pool{template: tmpl, initial: n.initial()}
		if n.Autoscaler != nil {
			a, err := n.Autoscaler.withDefaults()
			if err != nil {
				return nil, err
			}
			p.scaler, p.initial = &a, a.Min
		}
		ns.pools[w] = p
	}
	var err error
	if ns.scheduler, err = assets.EnsureScheduler(ctx, ao); err != nil {
		return nil, fmt.Errorf("local: Options.Nodes: %w", err)
	}
	if ns.kwok, err = assets.EnsureOperator(ctx, ao, assets.KWOKController(), KWOKVersion); err != nil {
		return nil, fmt.Errorf("local: Options.Nodes: %w", err)
	}
	return ns, nil
}

// startNodes starts a worker's kube-scheduler and KWOK controller, creates
// its first Nodes and waits until KWOK made them Ready, then starts its
// autoscaler, if any.
func (lc *localCluster) startNodes(ctx context.Context, c *topology.Cluster, p *pool, ns *nodeSetup, timeout time.Duration) error {
	sched, err := lc.cp.startScheduler(ctx, ns.scheduler)
	lc.track(sched)
	if err != nil {
		return err
	}
	kwok, err := lc.cp.startKWOK(ns.kwok.Path, ns.kwok.SourceDir)
	lc.track(kwok)
	if err != nil {
		return err
	}
	if err := createNodes(ctx, c, p.nodes(), timeout); err != nil {
		return err
	}
	if p.scaler == nil {
		return nil
	}
	return lc.startAutoscaler(p)
}

// NodesEnv is the environment variable NodesFromEnv reads.
const NodesEnv = "MKTK_NODES"

// NodesFromEnv returns the Nodes that $MKTK_NODES asks for: "" the
// default (nil: one Node per worker), N > 0 that many KWOK Nodes per
// worker, each holding 1/N of its quota. Anything else is an error naming
// the variable: a worker without Nodes runs no pod (a pool at zero is
// Options.WorkerNodes with an Autoscaler). local.New uses it when
// Options.Nodes is nil, so any suite runs on more Nodes without copies:
// MKTK_NODES=3 go test ./examples/...
func NodesFromEnv(getenv func(string) string) (*Nodes, error) {
	v := getenv(NodesEnv)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("$%s=%q: want a number of Nodes per worker, 1 or more (a worker without Nodes runs no pod; a pool at zero is Options.WorkerNodes with an Autoscaler)", NodesEnv, v)
	}
	return &Nodes{Count: n}, nil
}
