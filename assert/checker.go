package assert

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/redact"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// DefaultTimeout bounds every wait an assertion makes while nothing else
// progresses (see Checker.Timeout) where the topology says nothing else:
// New takes the topology's Timeouts().Progress.
const DefaultTimeout = topology.DefaultProgressTimeout

// MaxWaitFactor sets the default MaxWait: this many times Timeout (20
// minutes with DefaultTimeout; 50 s for a Checker with a 5 s Timeout).
const MaxWaitFactor = 10

// Checker runs assertions against a topology and the history its Observer
// recorded. Reads go through the Observer's informer caches, so checking many
// workloads costs no extra API requests (NoOrphans first brings the caches up
// to the workers' API servers with one list per kind and worker).
//
// The per-job assertions take a job object of any kind the Observer knows,
// or its manager Workload. A LeaderWorkerSet of several groups, which Kueue
// admits as one Workload per group, is judged group by group by
// ExactlyOnceAdmitted, NominationCleared, LosersCleaned and
// PlacementRecorded: every group's Workload must pass, and since one copy
// serves them all, a group placed on another worker fails.
type Checker struct {
	Topo *topology.Topology
	Obs  *observe.Observer
	// Timeout bounds each wait; New sets it to the topology's
	// Timeouts().Progress (2 min on the local topology, minutes more on kind
	// and AKS; topology.Options.Timeouts raises it), zero means
	// DefaultTimeout. A wait for one
	// workload (placement, a copy, a finish, a sync) is liveness: it goes
	// on past Timeout while other workloads or jobs in the topology keep
	// changing (the topology is busy: under load a workload waits its
	// turn), and gives up after Timeout with nothing changing anywhere, or
	// after MaxWait in all. Waits for the setup and for clusters use
	// Timeout alone.
	Timeout time.Duration
	// MaxWait bounds a wait however busy the topology is; default
	// MaxWaitFactor × Timeout.
	MaxWait time.Duration
	// SyncSLO, when set, makes StatusSynced fail a manager job whose final
	// state came more than this after the remote one's; zero judges only
	// that it came, within Timeout (liveness).
	SyncSLO time.Duration
	// Artifacts is the directory a failed assertion writes its report, the
	// objects involved, their Events and every cluster's controller logs
	// to (redacted); New sets it from $ARTIFACTS (ArtifactsFromEnv); empty
	// writes nothing.
	Artifacts string
	// Since, when set, limits the topology-wide history assertions
	// (QuotaRespected) to violations from that moment on: tests that share
	// one topology are each judged on their own time. Earlier events still
	// count toward state (quota held since before). Per-workload assertions
	// need no such window: they judge only the workload's current life.
	Since time.Time
}

// New returns a Checker waiting as long as the topology's pace says
// (Topology.Timeouts).
func New(topo *topology.Topology, obs *observe.Observer) *Checker {
	c := &Checker{Topo: topo, Obs: obs, Timeout: DefaultTimeout, Artifacts: ArtifactsFromEnv(os.Getenv)}
	if topo != nil {
		c.Timeout = topo.Timeouts().Progress
	}
	return c
}

func (c *Checker) maxWait() time.Duration {
	if c.MaxWait <= 0 {
		return MaxWaitFactor * c.timeout()
	}
	return c.MaxWait
}

func (c *Checker) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

func (c *Checker) reader(cluster string) client.Reader { return c.Obs.Reader(cluster) }

// target is a job and its manager Workload.
type target struct {
	namespace   string
	job         string       // job object name (remote copies share it)
	jobKind     observe.Kind // KindJob, KindJobSet, ...
	workload    string
	jobUID      types.UID // of the manager's job object; "" if unknown
	workloadUID types.UID // of the manager Workload; "" if unknown
}

func (t target) String() string { return fmt.Sprintf("Workload %s/%s", t.namespace, t.workload) }

// jobRef names the job object: "Job default/sample".
func (t target) jobRef() string { return fmt.Sprintf("%s %s/%s", t.jobKind, t.namespace, t.job) }

// resolve finds the manager Workload of a job object (or takes a Workload as
// is), waiting for Kueue to create it.
func (c *Checker) resolve(ctx context.Context, obj client.Object) (target, error) {
	if wl, ok := obj.(*kueue.Workload); ok {
		if wl.UID == "" { // a reference by name: read the rest
			cur := &kueue.Workload{}
			if err := c.reader(c.Topo.Manager.Name).Get(ctx, client.ObjectKeyFromObject(wl), cur); err != nil {
				return target{}, fmt.Errorf("cluster %q: Workload %s/%s: %w", c.Topo.Manager.Name, wl.Namespace, wl.Name, err)
			}
			wl = cur
		}
		t := target{namespace: wl.Namespace, workload: wl.Name, workloadUID: wl.UID}
		// The job is the owner of a job kind other than Pod where there is
		// one: Kueue's pod integration adds a group's pods as owners too (a
		// LeaderWorkerSet group's Workload lists the LeaderWorkerSet and its
		// pods); a pod group's Workload has pods only, and its last is taken.
		for _, o := range wl.OwnerReferences {
			k := observe.Kind(o.Kind)
			if !observe.IsJobKind(k) || (k == observe.KindPod && t.job != "" && t.jobKind != observe.KindPod) {
				continue
			}
			t.job, t.jobUID, t.jobKind = o.Name, o.UID, k
		}
		return t, nil
	}
	kind, ok := observe.JobKindOf(obj)
	if !ok {
		return target{}, fmt.Errorf("%T %s/%s is neither a Workload nor a job kind the Observer knows (%v)", obj, obj.GetNamespace(), obj.GetName(), observe.KnownJobKinds())
	}
	t := target{namespace: obj.GetNamespace(), job: obj.GetName(), jobKind: kind}
	mgr := c.Topo.Manager.Name
	progress := func() time.Time {
		return c.Obs.LastProgress(func(_ observe.Kind, ns, name string) bool { return ns == t.namespace && name == t.job })
	}
	err := poll.UntilIdle(ctx, c.timeout(), c.maxWait(), fmt.Sprintf("cluster %q: the Workload of %T %s/%s", mgr, obj, t.namespace, t.job), progress, func(ctx context.Context) error {
		uid := obj.GetUID()
		if uid == "" {
			cur := obj.DeepCopyObject().(client.Object)
			if err := c.reader(mgr).Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
				return err
			}
			uid = cur.GetUID()
		}
		wl, err := observe.WorkloadOf(ctx, c.reader(mgr), t.namespace, uid)
		if err != nil {
			return err
		}
		t.workload, t.workloadUID, t.jobUID = wl.Name, wl.UID, uid
		return nil
	})
	return t, err
}

// resolveFor is resolve for an assertion: its error is that assertion's
// failure.
func (c *Checker) resolveFor(ctx context.Context, assertion string, obj client.Object) (target, error) {
	t, err := c.resolve(ctx, obj)
	if err != nil {
		return t, c.fail(ctx, &Failure{Assertion: assertion, Object: fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName()),
			Expected: "a manager Workload for the job", Problems: []string{err.Error()}})
	}
	return t, nil
}

// history returns the Workload and job events of t, of its current life only
// (see incarnation).
func (c *Checker) history(t target) (wl, job []observe.Event) {
	wl, _ = c.Obs.History(observe.KindWorkload, t.namespace, t.workload)
	if t.job != "" {
		job, _ = c.Obs.History(t.jobKind, t.namespace, t.job)
	}
	in := incarnation{manager: c.Topo.Manager.Name, workloadUID: t.workloadUID, jobUID: t.jobUID, skew: c.skew()}
	return in.filter(wl, job)
}

func sortEvents(ev []observe.Event) {
	slices.SortStableFunc(ev, func(a, b observe.Event) int { return a.Time.Compare(b.Time) })
}

func redactText(s string) string { return redact.String(s) }

func (c *Checker) skew() time.Duration { return DefaultSkew }

// assumed is "" for a fact of Kueue's configuration that was read from the
// cluster or given, else " (<fact> unknown: why, and what was assumed)", to
// end a message whose verdict depends on it.
func (c *Checker) assumed(fact string) string {
	if why, ok := c.Topo.Facts.Assumed[fact]; ok {
		return " (" + fact + " unknown: " + why + ")"
	}
	return ""
}
