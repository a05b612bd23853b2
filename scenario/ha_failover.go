package scenario

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

// FailoverOptions shape Failover.
type FailoverOptions struct {
	// Cluster whose Kueue leader is stopped: the manager (default) or a
	// worker.
	Cluster string
	// Dispatch is the load, batch/Jobs only (Kinds, Fails and
	// StartTimeout must be unset), submitted to the manager one every
	// Interval. Defaults: Jobs 50; NamePrefix "failover-<cluster>"; CPU
	// "100m", Memory "100Mi"; RunFor 1s.
	Dispatch DispatchOptions
	// StopAfter: the leader is stopped once this many Jobs were created;
	// default Dispatch.Jobs/4, so that dispatch is under way and most Jobs
	// come during and after the switch.
	StopAfter int
	// Interval between two Job creations; default 100ms.
	Interval time.Duration
	// Stop ends the leader, given the Lease holder identity. Default: the
	// provider's KillReplica(ctx, cluster, replica) when it has one (the
	// local provider in HA mode: a crash, the Lease is not released), else
	// the deletion of the Pod the identity names ("<pod>_<uuid>") in Kueue's
	// namespace, as on a real cluster.
	Stop func(ctx context.Context, c *topology.Cluster, holder string) error
	// ProbeEvery is how often, from the stop until the new leader holds the
	// Lease plus Settle, the visibility API and the webhooks of Cluster
	// are probed; default 100ms. Settle defaults to 3s.
	ProbeEvery, Settle time.Duration
	// TakeoverTimeout bounds the wait for a new leader; default 2 minutes.
	TakeoverTimeout time.Duration
}

// FailoverResult is what Failover measured.
type FailoverResult struct {
	Cluster string
	Jobs    []*batchv1.Job
	// OldLeader and NewLeader are the Lease holder identities before the
	// stop and after the takeover.
	OldLeader, NewLeader string
	// Takeover is the time from the stop to another identity holding the
	// Lease; LeaseDuration is the Lease's own (spec.leaseDurationSeconds).
	Takeover, LeaseDuration time.Duration
	// Creates counts the manager's Job creates (through its webhooks);
	// CreateFailures those that failed and were retried.
	Creates, CreateFailures int
	// WebhookProbes counts dry-run creates of a queued Job on Cluster
	// (Kueue's mutating and validating webhooks) from the stop to the end of
	// the probing; WebhookFailures those that failed.
	WebhookProbes, WebhookFailures int
	// VisibilityProbes counts pendingworkloads requests for Cluster's
	// ClusterQueue through its API server (the APIService); Survivor* the
	// same sent directly to each surviving replica, when the provider can
	// reach replicas (topology.ReplicaVisibility).
	VisibilityProbes, VisibilityFailures int
	SurvivorProbes, SurvivorFailures     int
	FirstErrors                          []string // up to 5 of the failures above
	// Submitting is how long the Jobs took to submit; Checking how long the
	// final checks took (mostly waiting for the last Jobs to finish and for
	// the workers' copies to go).
	Submitting, Checking time.Duration
	// NotResumed lists, when Cluster is the manager, the Jobs that were
	// waiting for dispatch when the leader stopped and that the new leader
	// neither nominated, placed nor finished within the Checker's Timeout
	// (each also an error wrapping ErrNotResumed; see there why Kueue v0.18
	// and later do that). The per-Job checks skip them.
	NotResumed             []string
	stoppedAt, takenOverAt time.Time
}

func (r FailoverResult) String() string {
	return fmt.Sprintf("cluster %q: leader %s stopped, %s took over after %s (lease duration %s); Job creates on the manager: %d, failed %d; webhook probes on %q: %d, failed %d; visibility through the API server: %d, failed %d; directly from the survivors: %d, failed %d; submitting took %s, the final checks %s",
		r.Cluster, r.OldLeader, r.NewLeader, r.Takeover.Round(time.Millisecond), r.LeaseDuration, r.Creates, r.CreateFailures,
		r.Cluster, r.WebhookProbes, r.WebhookFailures, r.VisibilityProbes, r.VisibilityFailures, r.SurvivorProbes, r.SurvivorFailures,
		r.Submitting.Round(time.Millisecond), r.Checking.Round(time.Millisecond))
}

// Failover is the leader-failover scenario for a Kueue that runs several
// replicas with leader election: it submits Jobs to the manager one by
// one; once StopAfter were created, it stops the Kueue leader of Cluster
// (default: kills it) and measures how long until another replica holds
// Kueue's leader Lease, while it keeps submitting and probes Cluster's
// webhooks (dry-run creates) and visibility API (through the API server
// and, when the provider can, directly on each surviving replica). Then
// every Job must be ExactlyOnceAdmitted and Finished, and nothing orphaned
// (NoOrphans). The result carries the measurements; the error joins every
// failed check. Probe failures during the switch are measured, not judged:
// the caller decides what it tolerates.
func Failover(ctx context.Context, env *Env, o FailoverOptions) (FailoverResult, error) {
	o, err := o.resolve(env)
	if err != nil {
		return FailoverResult{}, err
	}
	c := clusterNamed(env.Topo, o.Cluster)
	res := FailoverResult{Cluster: c.Name}
	ns := env.Topo.Spec.Kueue.Namespace
	lease := client.ObjectKey{Namespace: ns, Name: configapi.DefaultLeaderElectionID}
	holder := func(ctx context.Context) (string, time.Duration, error) {
		l := &coordinationv1.Lease{}
		if err := c.Client.Get(ctx, lease, l); err != nil {
			return "", 0, fmt.Errorf("cluster %q: Lease %s: %w", c.Name, lease, err)
		}
		return ptr.Deref(l.Spec.HolderIdentity, ""), time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second, nil
	}
	if err := poll.Until(ctx, o.TakeoverTimeout, fmt.Sprintf("cluster %q: a holder of Kueue's leader Lease %s", c.Name, lease), func(ctx context.Context) error {
		h, d, err := holder(ctx)
		res.OldLeader, res.LeaseDuration = h, d
		if err == nil && h == "" {
			err = errors.New("no holder")
		}
		return err
	}); err != nil {
		return res, err
	}
	probes, err := newFailoverProbes(env, c, res.OldLeader)
	if err != nil {
		return res, err
	}

	// Submit the Jobs; stop the leader after StopAfter of them.
	mgr := env.Topo.Manager
	stopped := make(chan error, 1)
	var mu sync.Mutex
	record := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if len(res.FirstErrors) < 5 {
			res.FirstErrors = append(res.FirstErrors, fmt.Sprintf("%s: %v", what, err))
		}
	}
	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	var probesDone sync.WaitGroup
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	submitStart := time.Now()
	d := o.Dispatch
	for i := range d.Jobs {
		j := workload.NewJob(fmt.Sprintf("%s-%d", d.NamePrefix, i), cmp.Or(d.Namespace, env.Topo.Spec.Queues.Namespaces[0])).
			Queue(env.Topo.Spec.Queues.LocalQueue).Requests(d.CPU, d.Memory).RunFor(d.RunFor).Obj()
		for {
			res.Creates++
			cur := j.DeepCopy()
			err := mgr.Client.Create(ctx, cur)
			if err == nil {
				j = cur
				break
			}
			res.CreateFailures++
			record(fmt.Sprintf("cluster %q: create Job %s/%s", mgr.Name, j.Namespace, j.Name), err)
			if res.CreateFailures > 10*d.Jobs {
				return res, fmt.Errorf("cluster %q: Job creates keep failing: %v", mgr.Name, err)
			}
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-tick.C:
			}
		}
		res.Jobs = append(res.Jobs, j)
		if i+1 == o.StopAfter {
			res.stoppedAt = time.Now()
			go func() { stopped <- o.Stop(ctx, c, res.OldLeader) }()
			probesDone.Go(func() { probes.run(probeCtx, o.ProbeEvery, record) })
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-tick.C:
		}
	}
	res.Submitting = time.Since(submitStart)
	if err := <-stopped; err != nil {
		return res, fmt.Errorf("cluster %q: stop the Kueue leader %s: %w", c.Name, res.OldLeader, err)
	}
	err = poll.UntilEvery(ctx, o.TakeoverTimeout, 50*time.Millisecond, fmt.Sprintf("cluster %q: another replica than %s to hold Kueue's leader Lease %s", c.Name, res.OldLeader, lease), func(ctx context.Context) error {
		h, _, err := holder(ctx)
		if err != nil {
			return err
		}
		if h == "" || h == res.OldLeader {
			return fmt.Errorf("holder %q", h)
		}
		res.NewLeader, res.takenOverAt = h, time.Now()
		return nil
	})
	if err != nil {
		stopProbes()
		probesDone.Wait()
		return res, err
	}
	res.Takeover = res.takenOverAt.Sub(res.stoppedAt)
	settle := time.NewTimer(o.Settle)
	select {
	case <-ctx.Done():
	case <-settle.C:
	}
	stopProbes()
	probesDone.Wait()
	probes.addTo(&res)

	checkStart := time.Now()
	jobs := make([]client.Object, len(res.Jobs))
	for i, j := range res.Jobs {
		jobs[i] = j
	}
	var missed []notResumed
	if c.Name == env.Topo.Manager.Name {
		r, err := begin(env, "Failover")
		if err != nil {
			return res, err
		}
		jobs, missed = r.resumed(ctx, jobs, res.stoppedAt, res.takenOverAt, "the new leader "+res.NewLeader)
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			errs[i] = errors.Join(env.Check.ExactlyOnceAdmitted(ctx, j), env.Check.Finished(ctx, j))
		})
	}
	wg.Wait()
	for _, m := range missed {
		res.NotResumed = append(res.NotResumed, m.job)
		errs = append(errs, m.err)
	}
	if len(missed) == 0 {
		errs = append(errs, env.Check.NoOrphans(ctx)) // else their copies may stay; that is the same cause
	}
	res.Checking = time.Since(checkStart)
	return res, errors.Join(errs...)
}

func (o FailoverOptions) resolve(env *Env) (FailoverOptions, error) {
	if o.Cluster == "" {
		o.Cluster = env.Topo.Manager.Name
	}
	if clusterNamed(env.Topo, o.Cluster) == nil {
		return o, fmt.Errorf("scenario: FailoverOptions.Cluster: no cluster %q in the topology", o.Cluster)
	}
	d := &o.Dispatch
	if err := d.use("Failover", "FailoverOptions.Dispatch", DispatchOptions{Jobs: 50, NamePrefix: "failover-" + o.Cluster, CPU: "100m", Memory: "100Mi", RunFor: time.Second},
		map[string]string{"Kinds": "it submits batch/Jobs only", "Fails": "its Jobs must succeed", "StartTimeout": "it waits for the Jobs to finish, not to start"}); err != nil {
		return o, err
	}
	if err := d.defaults("Failover", "FailoverOptions.Dispatch", env.Topo.JobSize()); err != nil {
		return o, err
	}
	if o.StopAfter == 0 {
		o.StopAfter = max(d.Jobs/4, 1)
	}
	if o.StopAfter < 1 || o.StopAfter > d.Jobs {
		return o, fmt.Errorf("scenario: FailoverOptions.StopAfter: %d; want 1 to Dispatch.Jobs (%d)", o.StopAfter, d.Jobs)
	}
	o.Interval = cmpOr(o.Interval, 100*time.Millisecond)
	o.ProbeEvery = cmpOr(o.ProbeEvery, 100*time.Millisecond)
	o.Settle = cmpOr(o.Settle, 3*time.Second)
	o.TakeoverTimeout = cmpOr(o.TakeoverTimeout, 2*time.Minute)
	if o.Stop == nil {
		o.Stop = defaultStop(env)
	}
	return o, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func clusterNamed(t *topology.Topology, name string) *topology.Cluster {
	for _, c := range t.Clusters() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// defaultStop kills the replica through the provider when it can, else
// deletes the leader's Pod.
func defaultStop(env *Env) func(ctx context.Context, c *topology.Cluster, holder string) error {
	if k, ok := env.Topo.Provider().(topology.ReplicaKiller); ok {
		return func(ctx context.Context, c *topology.Cluster, holder string) error {
			return k.KillReplica(ctx, c.Name, replicaOfHolder(holder))
		}
	}
	ns := env.Topo.Spec.Kueue.Namespace
	return func(ctx context.Context, c *topology.Cluster, holder string) error {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: replicaOfHolder(holder)}}
		if err := c.Client.Delete(ctx, pod); err != nil {
			return fmt.Errorf("cluster %q: delete the leader's Pod %s/%s: %w", c.Name, ns, pod.Name, err)
		}
		return nil
	}
}

// replicaOfHolder is the replica (or Pod) a Lease holder identity names:
// controller-runtime writes "<hostname>_<uuid>", and a Pod's host name is
// its name.
func replicaOfHolder(holder string) string {
	name, _, _ := strings.Cut(holder, "_")
	return name
}

// failoverProbes probe one cluster's webhooks and visibility API during the
// switch.
type failoverProbes struct {
	c      *topology.Cluster
	cq, ns string
	queue  string
	api    visibilityclient.Interface
	// survivors reach each replica but the stopped leader directly.
	survivors map[string]visibilityclient.Interface

	mu                                 sync.Mutex
	webhook, webhookFail, vis, visFail int
	direct, directFail                 int
}

func newFailoverProbes(env *Env, c *topology.Cluster, leader string) (*failoverProbes, error) {
	api, err := visibilityclient.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	p := &failoverProbes{c: c, cq: env.Topo.Spec.Queues.ClusterQueue, ns: env.Topo.Spec.Queues.Namespaces[0],
		queue: env.Topo.Spec.Queues.LocalQueue, api: api, survivors: map[string]visibilityclient.Interface{}}
	if rv, ok := env.Topo.Provider().(topology.ReplicaVisibility); ok {
		cfgs, err := rv.VisibilityConfigs(c.Name)
		if err == nil {
			for name, cfg := range cfgs {
				if name == replicaOfHolder(leader) {
					continue
				}
				cs, err := visibilityclient.NewForConfig(rest.CopyConfig(cfg))
				if err != nil {
					return nil, err
				}
				p.survivors[name] = cs
			}
		}
	}
	return p, nil
}

// probeTimeout bounds each probe request.
const probeTimeout = 2 * time.Second

// run probes every interval until ctx ends.
func (p *failoverProbes) run(ctx context.Context, every time.Duration, record func(string, error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Each request its own deadline: with one for all, a slow first
		// answer left the next ones no time, and they failed for it.
		call := func(f func(context.Context) error) error {
			rctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			return f(rctx)
		}
		job := workload.NewJob("failover-probe", p.ns).Queue(p.queue).Requests("100m", "100Mi").Obj()
		job.GenerateName, job.Name = "failover-probe-", ""
		werr := call(func(rctx context.Context) error { return p.c.Client.Create(rctx, job, client.DryRunAll) })
		if werr == nil && !ptr.Deref(job.Spec.Suspend, false) {
			werr = errors.New("the dry-run Job came back unsuspended: Kueue's mutating webhook was not called")
		}
		verr := call(func(rctx context.Context) error {
			_, err := p.api.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(rctx, p.cq, metav1.GetOptions{})
			return err
		})
		var derrs []error
		for name, cs := range p.survivors {
			err := call(func(rctx context.Context) error {
				_, err := cs.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(rctx, p.cq, metav1.GetOptions{})
				return err
			})
			if err != nil {
				derrs = append(derrs, fmt.Errorf("replica %s: %w", name, err))
			}
		}
		if ctx.Err() != nil {
			return // cut by the end of probing: not counted
		}
		p.mu.Lock()
		p.webhook++
		p.vis++
		if werr != nil {
			p.webhookFail++
		}
		if verr != nil {
			p.visFail++
		}
		p.direct += len(p.survivors)
		p.directFail += len(derrs)
		p.mu.Unlock()
		if werr != nil {
			record(fmt.Sprintf("cluster %q: webhook probe (dry-run Job)", p.c.Name), werr)
		}
		if verr != nil {
			record(fmt.Sprintf("cluster %q: visibility through the API server", p.c.Name), verr)
		}
		for _, err := range derrs {
			record(fmt.Sprintf("cluster %q: visibility directly", p.c.Name), err)
		}
	}
}

func (p *failoverProbes) addTo(r *FailoverResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.WebhookProbes, r.WebhookFailures = p.webhook, p.webhookFail
	r.VisibilityProbes, r.VisibilityFailures = p.vis, p.visFail
	r.SurvivorProbes, r.SurvivorFailures = p.direct, p.directFail
}

// Failover runs Failover and reports its error.
func (r *Runner) Failover(ctx context.Context, o FailoverOptions) (FailoverResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, Failover, o)
}
