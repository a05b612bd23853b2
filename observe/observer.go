package observe

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/topology"
)

// Options tune an Observer. The zero value is usable.
type Options struct {
	// MaxEventsPerObject bounds the transitions kept per object (all clusters
	// together); older ones are dropped and counted. Default 512.
	MaxEventsPerObject int
	// SyncTimeout bounds the initial informer sync. Default 1 minute.
	SyncTimeout time.Duration
	// WrapTransport, when set, wraps the HTTP transport of each cluster's
	// informers: to count or log the requests the Observer makes.
	WrapTransport func(cluster string, rt http.RoundTripper) http.RoundTripper
}

// Observer records the transitions of Workloads, job objects, ClusterQueues'
// quotas and MultiKueueClusters on every cluster of a topology. It is safe
// for concurrent use.
type Observer struct {
	clusters []string
	manager  string
	jobKinds []Kind
	readers  map[string]client.Reader
	max      int
	wrap     func(string, http.RoundTripper) http.RoundTripper
	// audit is each cluster's audit source, when the provider has one
	// (see Attribute).
	audit map[string]topology.AuditSource

	mu      sync.Mutex
	records map[objKey]*record
	// pods are the names of the pods recorded for each job object (by
	// its kind, namespace and name; see podOwner).
	pods map[objKey]map[string]bool
	// podsUnread says, per worker, why its pods are not recorded (its
	// credentials may not list them); absent when they are.
	podsUnread map[string]error
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

type objKey struct {
	kind      Kind
	namespace string
	name      string
}

// record is the history of one object identity (kind, namespace, name) across
// all clusters: remote copies share the manager object's name.
type record struct {
	events  []Event
	dropped int
	last    map[string]*snapshot // per cluster; nil entry after deletion
}

// Start begins watching every cluster of topo and returns once the informers
// have synced. ctx bounds the start only, as for a topology: the Observer runs
// until Stop, so a setup step's short-lived context (Ginkgo's BeforeSuite,
// for instance) does not end it.
func Start(ctx context.Context, topo *topology.Topology, opts Options) (*Observer, error) {
	if opts.MaxEventsPerObject <= 0 {
		opts.MaxEventsPerObject = 512
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = time.Minute
	}
	o := &Observer{
		readers: map[string]client.Reader{}, records: map[objKey]*record{}, max: opts.MaxEventsPerObject, wrap: opts.WrapTransport,
		pods: map[objKey]map[string]bool{}, podsUnread: map[string]error{},
		jobKinds: JobKindsFor(topo.Spec.Kueue.Integrations), audit: auditSources(topo),
	}
	if topo.Manager != nil {
		o.manager = topo.Manager.Name
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o.cancel = cancel
	for _, c := range topo.Clusters() {
		o.clusters = append(o.clusters, c.Name)
		if err := o.watchCluster(runCtx, c); err != nil {
			o.Stop()
			return nil, err
		}
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, opts.SyncTimeout)
	defer syncCancel()
	for _, c := range topo.Clusters() {
		if !o.readers[c.Name].(cache.Cache).WaitForCacheSync(syncCtx) {
			o.Stop()
			return nil, fmt.Errorf("observe: cluster %q: informers did not sync within %s", c.Name, opts.SyncTimeout)
		}
	}
	return o, nil
}

func (o *Observer) watchCluster(ctx context.Context, c *topology.Cluster) error {
	cfg := rest.CopyConfig(c.Config)
	if o.wrap != nil {
		name := c.Name
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return o.wrap(name, rt) })
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("observe: cluster %q: %w", c.Name, err)
	}
	ch, err := cache.New(cfg, cache.Options{
		HTTPClient:       httpClient,
		Scheme:           c.Client.Scheme(),
		Mapper:           c.Client.RESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: slimPod}},
	})
	if err != nil {
		return fmt.Errorf("observe: cluster %q: %w", c.Name, err)
	}
	o.readers[c.Name] = ch
	type watched struct {
		obj  client.Object
		kind Kind
	}
	kinds := []watched{{&kueue.Workload{}, KindWorkload}, {&kueue.ClusterQueue{}, KindClusterQueue}}
	for _, k := range o.jobKinds {
		if k == KindPod {
			continue // below, with the other pods
		}
		obj, err := NewJobObject(k)
		if err != nil {
			return err
		}
		kinds = append(kinds, watched{obj, k})
	}
	if c.Role == topology.RoleManager {
		kinds = append(kinds, watched{&kueue.MultiKueueCluster{}, KindMultiKueueCluster})
	}
	if c.Role == topology.RoleWorker || slices.Contains(o.jobKinds, KindPod) {
		// A worker's pods, and the manager's where Kueue's pod integration
		// makes pods job objects (see KindPod), where the credentials may
		// list them (an existing cluster's may not: its pods are then not
		// recorded, and PodsUnread says why).
		if err := c.Client.List(ctx, &corev1.PodList{}, client.Limit(1)); err != nil {
			o.podsUnread[c.Name] = err
		} else {
			kinds = append(kinds, watched{&corev1.Pod{}, KindPod})
		}
	}
	for _, k := range kinds {
		inf, err := ch.GetInformer(ctx, k.obj)
		if err != nil {
			return fmt.Errorf("observe: cluster %q: informer for %s: %w", c.Name, k.kind, err)
		}
		kind, cluster := k.kind, c.Name
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.observe(cluster, kind, obj, false) },
			UpdateFunc: func(_, obj any) { o.observe(cluster, kind, obj, false) },
			DeleteFunc: func(obj any) { o.observe(cluster, kind, obj, true) },
		}); err != nil {
			return err
		}
	}
	o.wg.Go(func() { _ = ch.Start(ctx) })
	return nil
}

// observe turns one informer notification into transitions.
func (o *Observer) observe(cluster string, kind Kind, obj any, deleted bool) {
	now := time.Now()
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	co, ok := obj.(client.Object)
	if !ok {
		return
	}
	var podJob objKey // a pod's job object
	if p, isPod := co.(*corev1.Pod); isPod {
		jk, jn, owned := podOwner(p)
		if !owned || (jk == KindPod && !slices.Contains(o.jobKinds, KindPod)) {
			return // not a pod of a job object: not recorded
		}
		if cluster == o.manager && jk != KindPod {
			return // the manager's pods are recorded only as job objects
		}
		podJob = objKey{kind: jk, namespace: p.Namespace, name: jn}
	}
	key := objKey{kind: kind, namespace: co.GetNamespace(), name: co.GetName()}
	base := Event{Time: now, Cluster: cluster, Kind: kind, Namespace: key.namespace, Name: key.name, UID: co.GetUID()}
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.records[key]
	if r == nil {
		r = &record{last: map[string]*snapshot{}}
		o.records[key] = r
	}
	gone := func() {
		if prev := r.last[cluster]; prev != nil {
			e := base
			e.Type, e.Labels, e.UID = Deleted, prev.labels, prev.uid
			o.append(r, e)
		}
		r.last[cluster] = nil
	}
	if deleted {
		gone()
		return
	}
	var cur *snapshot
	switch v := obj.(type) {
	case *corev1.Pod:
		if o.pods[podJob] == nil {
			o.pods[podJob] = map[string]bool{}
		}
		o.pods[podJob][v.Name] = true
		cur = podSnapshot(v, podJob.kind == KindPod)
	case *kueue.Workload:
		cur = workloadSnapshot(v)
	case *kueue.MultiKueueCluster:
		cur = clusterSnapshot(v)
	case *kueue.ClusterQueue:
		cur = clusterQueueSnapshot(v)
	default:
		st, ok := JobStateOf(co)
		if !ok {
			return
		}
		cur = jobSnapshot(co, st)
	}
	if prev := r.last[cluster]; prev != nil && prev.uid != cur.uid {
		// Deleted and created again under the same name while the watch
		// was down (a relist shows only the new object).
		gone()
	}
	for _, e := range diff(base, r.last[cluster], cur) {
		o.append(r, e)
	}
	r.last[cluster] = cur
}

func (o *Observer) append(r *record, e Event) {
	r.events = append(r.events, e)
	if len(r.events) > o.max {
		n := len(r.events) - o.max
		r.events = slices.Delete(r.events, 0, n)
		r.dropped += n
	}
}

// Stop ends every watch and waits for the informers to return.
func (o *Observer) Stop() {
	if o.cancel != nil {
		o.cancel()
	}
	o.wg.Wait()
}

// LastProgress is the time of the newest Workload or job-object event the
// Observer recorded on any cluster, leaving out the objects skip names (nil
// skips none): work moving somewhere else in the topology. Waits that judge
// liveness (assert's) go on while it moves.
func (o *Observer) LastProgress(skip func(kind Kind, namespace, name string) bool) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	var last time.Time
	for k, r := range o.records {
		if len(r.events) == 0 || (k.kind != KindWorkload && !IsJobKind(k.kind)) {
			continue
		}
		if skip != nil && skip(k.kind, k.namespace, k.name) {
			continue
		}
		if t := r.events[len(r.events)-1].Time; t.After(last) {
			last = t
		}
	}
	return last
}

// JobKinds returns the job kinds watched: batch/Job, and the other known
// kinds (KnownJobKinds) whose Kueue integration is on.
func (o *Observer) JobKinds() []Kind { return slices.Clone(o.jobKinds) }

// Clusters returns the observed cluster names, manager first.
func (o *Observer) Clusters() []string { return slices.Clone(o.clusters) }

// History returns the transitions of the object of kind with namespace/name on
// every cluster, oldest first. Dropped is how many older ones were discarded.
func (o *Observer) History(kind Kind, namespace, name string) (events []Event, dropped int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.records[objKey{kind: kind, namespace: namespace, name: name}]
	if r == nil {
		return nil, 0
	}
	return slices.Clone(r.events), r.dropped
}

// Objects returns the namespace/name of every object of kind ever seen.
func (o *Observer) Objects(kind Kind) []client.ObjectKey {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []client.ObjectKey
	for k := range o.records {
		if k.kind == kind {
			out = append(out, client.ObjectKey{Namespace: k.namespace, Name: k.name})
		}
	}
	slices.SortFunc(out, func(a, b client.ObjectKey) int {
		if a.Namespace != b.Namespace {
			if a.Namespace < b.Namespace {
				return -1
			}
			return 1
		}
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// Reader returns the informer-backed reader of a cluster: reads from it cost
// no API requests. Nil for an unknown cluster.
func (o *Observer) Reader(cluster string) client.Reader { return o.readers[cluster] }
