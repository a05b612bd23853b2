package report

import (
	"context"
	"strconv"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// timings are the figures of one workload, derived from its events.
type timings struct {
	winner   string
	created  time.Time
	dispatch *float64
	admit    *float64
	syncLag  *float64
	cleanup  *float64
	losers   int
	outcome  string
	// loserCleanup is each loser's cleanup latency (ms), by worker.
	loserCleanup map[string]float64
}

// workloadTimings derives a workload's figures from the Workload events wl
// and the job object events job (every cluster, oldest first). jobUID and
// wlUID, when set, keep the manager's events to that object.
func workloadTimings(manager string, wl, job []observe.Event, jobUID, wlUID types.UID) timings {
	var t timings
	onMgr := func(e observe.Event, uid types.UID) bool {
		return e.Cluster == manager && (uid == "" || e.UID == uid)
	}
	for _, e := range job {
		if onMgr(e, jobUID) && e.Type == observe.Created {
			t.created = e.Time
			break
		}
	}
	if t.created.IsZero() {
		for _, e := range wl {
			if onMgr(e, wlUID) && e.Type == observe.Created {
				t.created = e.Time
				break
			}
		}
	}
	for _, e := range wl {
		if onMgr(e, wlUID) && e.ClusterName() != "" {
			t.winner = e.Values[0]
		}
	}
	// Copies MultiKueue created on each worker, by UID.
	type cp struct {
		cluster          string
		created, admit   time.Time
		deleted          time.Time
		createdSeen, del bool
	}
	var copies []*cp
	byUID := map[types.UID]*cp{}
	for _, e := range wl {
		if e.Cluster == manager || e.Time.Before(t.created) {
			continue
		}
		c := byUID[e.UID]
		if c == nil {
			if e.Type != observe.Created || !observe.FromMultiKueue(e.Labels) {
				continue
			}
			c = &cp{cluster: e.Cluster, created: e.Time, createdSeen: true}
			byUID[e.UID] = c
			copies = append(copies, c)
			continue
		}
		switch e.Type {
		case observe.Admitted:
			if c.admit.IsZero() {
				c.admit = e.Time
			}
		case observe.Deleted:
			c.deleted, c.del = e.Time, true
		}
	}
	// Loser cleanup counts from the winner's copy Admitted: MultiKueue
	// deletes the losing copies once it is (before it writes clusterName on
	// the manager), as LosersCleaned checks.
	var wonAt time.Time
	for _, c := range copies {
		if c.cluster == t.winner && !c.admit.IsZero() {
			wonAt = c.admit
			t.dispatch, t.admit = msPtr(c.admit.Sub(t.created)), msPtr(c.admit.Sub(c.created))
			break
		}
	}
	t.loserCleanup = map[string]float64{}
	var last time.Time
	allGone := true
	for _, c := range copies {
		if c.cluster == t.winner {
			continue
		}
		t.losers++
		if !c.del {
			allGone = false
			continue
		}
		if !wonAt.IsZero() {
			t.loserCleanup[c.cluster] = ms(c.deleted.Sub(wonAt))
		}
		if c.deleted.After(last) {
			last = c.deleted
		}
	}
	if t.losers > 0 && allGone && !wonAt.IsZero() {
		t.cleanup = msPtr(last.Sub(wonAt))
	}
	var remoteDone, mgrDone time.Time
	for _, e := range job {
		if e.Type != observe.JobSucceeded && e.Type != observe.JobFailed {
			continue
		}
		switch {
		case onMgr(e, jobUID) && mgrDone.IsZero():
			mgrDone, t.outcome = e.Time, string(e.Type)
		case e.Cluster == t.winner && observe.FromMultiKueue(e.Labels) && remoteDone.IsZero():
			remoteDone = e.Time
		}
	}
	if !remoteDone.IsZero() && !mgrDone.IsZero() {
		t.syncLag = msPtr(mgrDone.Sub(remoteDone))
	}
	return t
}

// Job is a submitted job object, tagged with the phase that submitted it.
type Job struct {
	Phase string
	Obj   client.Object
}

// CollectInput is what Collect reads.
type CollectInput struct {
	// Run names the run.
	Run  string
	Topo *topology.Topology
	Obs  *observe.Observer
	// Start is the run's start (the topology's start).
	Start time.Time
	// Jobs are the job objects submitted, as created (with their UIDs).
	Jobs []Job
	// Requests, when set, gives the API requests made to each cluster.
	Requests *Counter
	// Memory, when set, gives the memory (PSS) of each cluster's
	// processes (MemoryByCluster).
	Memory map[string]int64
}

// Collect derives the cluster, workload and transition records of a run
// from the Observer's history and caches; it makes no API request.
func Collect(ctx context.Context, in CollectInput) (clusters []Cluster, workloads []Workload, transitions []Transition) {
	mgr := in.Topo.Manager.Name
	clusterRec := map[string]*Cluster{}
	for _, c := range in.Topo.Clusters() {
		rec := &Cluster{Header: header(RecordCluster, in.Run, c.Name), Role: string(c.Role), MemoryBytes: in.Memory[c.Name]}
		if in.Requests != nil {
			rec.APIRequests = in.Requests.Count(c.Name)
		}
		clusterRec[c.Name] = rec
	}
	lat := map[string]*[4][]float64{} // per worker: dispatch, admit, sync, cleanup
	for _, w := range in.Topo.Workers {
		lat[w.Name] = &[4][]float64{}
	}
	for _, j := range in.Jobs {
		o := j.Obj
		kind, _ := observe.JobKindOf(o)
		rec := Workload{Header: header(RecordWorkload, in.Run, mgr), Phase: j.Phase, Kind: string(kind), Namespace: o.GetNamespace(), Name: o.GetName()}
		wlKey, wlUID := managerWorkload(ctx, in.Obs.Reader(mgr), o)
		rec.Workload = wlKey
		var wlEv []observe.Event
		if wlKey != "" {
			wlEv, _ = in.Obs.History(observe.KindWorkload, o.GetNamespace(), wlKey)
		}
		jobEv, _ := in.Obs.History(kind, o.GetNamespace(), o.GetName())
		t := workloadTimings(mgr, wlEv, jobEv, o.GetUID(), wlUID)
		rec.Created, rec.DispatchLatencyMS, rec.RemoteAdmissionMS, rec.StatusSyncLagMS = t.created, t.dispatch, t.admit, t.syncLag
		rec.LoserCleanupMS, rec.Losers, rec.Outcome = t.cleanup, t.losers, t.outcome
		for _, e := range wlEv {
			if e.Cluster != mgr && e.Type == observe.Created && observe.FromMultiKueue(e.Labels) && clusterRec[e.Cluster] != nil {
				clusterRec[e.Cluster].RemoteCopies++
			}
		}
		if l := lat[t.winner]; l != nil {
			rec.Cluster = t.winner
			if j.Phase == PhaseLoad {
				clusterRec[t.winner].Placements++
				for i, v := range []*float64{t.dispatch, t.admit, t.syncLag} {
					if v != nil {
						l[i] = append(l[i], *v)
					}
				}
			}
		}
		if j.Phase == PhaseLoad {
			for w, v := range t.loserCleanup {
				if l := lat[w]; l != nil {
					l[3] = append(l[3], v)
				}
			}
		}
		workloads = append(workloads, rec)
	}
	for _, w := range in.Topo.Workers {
		rec, l := clusterRec[w.Name], lat[w.Name]
		rec.DispatchLatencyMS, rec.RemoteAdmissionMS, rec.StatusSyncLagMS, rec.LoserCleanupMS = DistOf(l[0]), DistOf(l[1]), DistOf(l[2]), DistOf(l[3])
		evs, _ := in.Obs.History(observe.KindMultiKueueCluster, "", w.Name)
		for _, e := range evs {
			if e.Cluster != mgr || (e.Type != observe.ClusterActive && e.Type != observe.ClusterInactive) {
				continue
			}
			reason, msg := parseActiveDetail(e.Detail)
			transitions = append(transitions, Transition{
				Header: header(RecordTransition, in.Run, w.Name), Time: e.Time, OffsetSeconds: round3(e.Time.Sub(in.Start).Seconds()),
				Active: e.Type == observe.ClusterActive, Reason: reason, Message: msg,
			})
			rec.ActiveTransitions++
		}
		mkc := &kueue.MultiKueueCluster{}
		if err := in.Obs.Reader(mgr).Get(ctx, client.ObjectKey{Name: w.Name}, mkc); err == nil {
			if c := apimeta.FindStatusCondition(mkc.Status.Conditions, kueue.MultiKueueClusterActive); c != nil && c.Status == "True" {
				v := round3(c.LastTransitionTime.Sub(in.Start).Seconds())
				rec.ActiveSeconds = &v
			}
		}
	}
	for _, c := range in.Topo.Clusters() {
		clusters = append(clusters, *clusterRec[c.Name])
	}
	return clusters, workloads, transitions
}

// managerWorkload finds the manager Workload of a job object in the
// Observer's cache (Kueue's job-uid label): its name and UID, or "".
func managerWorkload(ctx context.Context, r client.Reader, o client.Object) (string, types.UID) {
	if r == nil || o.GetUID() == "" {
		return "", ""
	}
	wl, err := observe.WorkloadOf(ctx, r, o.GetNamespace(), o.GetUID())
	if err != nil {
		return "", ""
	}
	return wl.Name, wl.UID
}

// parseActiveDetail splits the Observer's `reason=R message="M"`.
func parseActiveDetail(d string) (reason, message string) {
	rest, ok := strings.CutPrefix(d, "reason=")
	if !ok {
		return "", d
	}
	reason, m, _ := strings.Cut(rest, " message=")
	if u, err := strconv.Unquote(m); err == nil {
		m = u
	}
	return reason, m
}
