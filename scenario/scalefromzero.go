package scenario

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
)

// ScaleFromZeroOptions shape ScaleFromZero.
type ScaleFromZeroOptions struct {
	// Dispatch is the load, batch/Jobs only (Kinds and Fails must be
	// unset), submitted at once. Defaults: Jobs 2; NamePrefix
	// "scalefromzero"; CPU "1", Memory "64Mi"; RunFor 1s; StartTimeout, the
	// wait for a remote Job to start, Nodes' provisioning included,
	// the topology's Timeouts().Start.
	Dispatch DispatchOptions
}

// ScaleFromZeroResult is what ScaleFromZero saw on the workers.
type ScaleFromZeroResult struct {
	DispatchResult
	// NodesBefore is each worker's Node count when the scenario began;
	// NodesPeak the most it had during the run.
	NodesBefore, NodesPeak map[string]int
	// FromZero lists the jobs ("Job default/scalefromzero-0") that ran on a
	// worker that had no Node when the scenario began.
	FromZero []string
	// NodeWait is, per job of FromZero, how long its first pod on the worker
	// waited from its creation to its binding to a Node (the watch's
	// receive times).
	NodeWait map[string]time.Duration
}

// ScaleFromZero is the scale-from-zero scenario (a CAPZ MachinePool with
// min 0 on AKS; on the local topology a worker whose Nodes have an
// autoscaler at zero, local.Nodes.Autoscaler): it submits Jobs batch/Jobs
// to the manager, watching every worker's pods and Nodes; each is judged
// as Dispatch judges it (exactly once, nominations, losers, Finished with
// its status synced, quota, no orphans), and each that ran on a worker
// with no Node at the start must have run in pods that waited for a Node
// the worker gained meanwhile. It fails when no worker starts with no Node
// (there is nothing to scale from), when no job ran on such a worker, and
// when the Observer recorded no pod of a job that ran there.
func ScaleFromZero(ctx context.Context, env *Env, o ScaleFromZeroOptions) (ScaleFromZeroResult, error) {
	res := ScaleFromZeroResult{NodesBefore: map[string]int{}, NodesPeak: map[string]int{}, NodeWait: map[string]time.Duration{}}
	r, err := begin(env, "ScaleFromZero")
	if err != nil {
		return res, err
	}
	d := o.Dispatch
	if err := d.use(r.name, "ScaleFromZeroOptions.Dispatch", DispatchOptions{Jobs: 2, Memory: "64Mi"},
		map[string]string{"Kinds": "it submits batch/Jobs only", "Fails": "its Jobs must run to show the scale-up"}); err != nil {
		return res, err
	}
	if err := d.defaults(r.name, "ScaleFromZeroOptions.Dispatch", r.env.Topo.JobSize()); err != nil {
		return res, err
	}
	ns := r.namespace(d.Namespace)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchers := map[string]*nodeWatch{}
	var zero []string
	for _, w := range env.Topo.Workers {
		pw, err := watchNodes(ctx, w.Name, w.Config)
		if err != nil {
			return res, r.errorf("%w", err)
		}
		watchers[w.Name] = pw
		res.NodesBefore[w.Name] = pw.nodesAtStart
		if pw.nodesAtStart == 0 {
			zero = append(zero, w.Name)
		}
	}
	if len(zero) == 0 {
		return res, r.errorf("every worker has Nodes (%v): none to scale from zero; give one an autoscaled pool at zero (local.Nodes.Autoscaler)", res.NodesBefore)
	}
	tmpls := make([]JobTemplate, d.Jobs)
	for i := range tmpls {
		tmpls[i] = JobTemplate{Kind: observe.KindJob, Name: fmt.Sprintf("%s-%d", d.NamePrefix, i), Namespace: ns, CPU: d.CPU, Memory: d.Memory, RunFor: d.RunFor}
	}
	objs, err := r.build(tmpls)
	if err != nil {
		return res, err
	}
	res.DispatchResult, err = r.dispatch(ctx, objs, d)
	errs := []error{err}
	for name, pw := range watchers {
		res.NodesPeak[name] = pw.peak()
	}
	for _, ob := range objs {
		job := ref(ob)
		worker, ok := res.Placement[job]
		if !ok || res.NodesBefore[worker] != 0 {
			continue
		}
		res.FromZero = append(res.FromZero, job)
		created, bound, seen := firstPod(env.Obs, worker, ob)
		switch {
		case env.Obs.PodsUnread(worker) != nil:
			errs = append(errs, r.errorf("cluster %q: the Observer could not read its pods (%v): the node wait of %s is unknown", worker, env.Obs.PodsUnread(worker), job))
		case !seen:
			errs = append(errs, r.errorf("cluster %q: %s ran there, yet the Observer recorded no pod of it: nothing shows that it waited for a Node", worker, job))
		case bound.IsZero():
			errs = append(errs, r.errorf("cluster %q: the first pod of %s was never bound to a Node", worker, job))
		default:
			res.NodeWait[job] = bound.Sub(created)
		}
	}
	sort.Strings(res.FromZero)
	if len(res.FromZero) == 0 {
		errs = append(errs, r.errorf("no job ran on a worker with no Node at the start (%v); placements %v", zero, res.Placement))
	}
	for _, w := range zero {
		if res.PerWorker()[w] > 0 && res.NodesPeak[w] == 0 {
			errs = append(errs, r.errorf("cluster %q: ran %d jobs and never had a Node", w, res.PerWorker()[w]))
		}
	}
	return res, errors.Join(errs...)
}

// ScaleFromZero runs ScaleFromZero and reports its error.
func (r *Runner) ScaleFromZero(ctx context.Context, o ScaleFromZeroOptions) (ScaleFromZeroResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, ScaleFromZero, o)
}

// nodeWatch keeps, on one worker, the Node count at the start and its
// peak.
type nodeWatch struct {
	nodesAtStart int

	mu      sync.Mutex
	nodes   map[string]bool
	maxSeen int
}

// watchNodes lists the worker's Nodes, then watches them until ctx ends.
func watchNodes(ctx context.Context, cluster string, cfg *rest.Config) (*nodeWatch, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: client: %w", cluster, err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: list Nodes: %w", cluster, err)
	}
	w := &nodeWatch{nodesAtStart: len(nodes.Items), maxSeen: len(nodes.Items), nodes: map[string]bool{}}
	for _, n := range nodes.Items {
		w.nodes[n.Name] = true
	}
	nw, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: nodes.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: watch Nodes: %w", cluster, err)
	}
	go func() {
		for ev := range nw.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			w.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(w.nodes, n.Name)
			} else {
				w.nodes[n.Name] = true
			}
			w.maxSeen = max(w.maxSeen, len(w.nodes))
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func (w *nodeWatch) peak() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxSeen
}

// firstPod is the first pod the Observer recorded for Job job on worker:
// when it was created and when bound to a Node (zero if never); seen is
// false when there was none.
func firstPod(obs *observe.Observer, worker string, job client.Object) (created, bound time.Time, seen bool) {
	first := ""
	for _, e := range obs.PodHistory(observe.KindJob, job.GetNamespace(), job.GetName()) {
		switch {
		case e.Cluster != worker:
		case first == "" && e.Type == observe.Created:
			first, created, seen = e.Name, e.Time, true
		case e.Name == first && e.Type == observe.PodBound && bound.IsZero():
			bound = e.Time
		}
	}
	return created, bound, seen
}
