package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
)

// replica is what makes a kueueProcess one replica of several (HA): its name,
// the identity it writes into Kueue's leader Lease, its visibility server and
// the network it reaches its API server through, which kill cuts.
type replica struct {
	cluster string
	name    string // "kueue-0"
	index   int
	// visibilityPort is the replica's visibility server on 127.0.0.1.
	visibilityPort int
	// visibilityCert and visibilityKey are its serving certificate files;
	// authKubeconfig is the kubeconfig its delegated authentication and
	// authorization use (Kueue takes it from the process-global
	// --kubeconfig flag; see ha_visibility.go).
	visibilityCert, visibilityKey, authKubeconfig string
	net                                           *cuttableNet

	mu       sync.Mutex
	identity string // holder identity of the current start, "kueue-0_<uuid>"
	vis      *visibilityRunnable
	// crash cancels the context every runnable of the current start runs
	// in (controller-runtime's BaseContext): all at once, as when a process
	// dies, instead of controller-runtime's orderly shutdown, which stops
	// the leader-election runnables (the scheduler, MultiKueue) only after
	// the others.
	crash context.CancelFunc
}

// holderPrefix is how a Lease holder identity names this replica.
func (r *replica) holderPrefix() string { return r.name + "_" }

// currentIdentity is the Lease holder identity of the replica's current (or
// last) start.
func (r *replica) currentIdentity() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.identity
}

// leaderElection turns on controller-runtime's leader election for this
// replica's manager, as kueueconfig.Load derived it from the Configuration's
// leaderElection section (Lease name and namespace, durations, release on
// cancel), with a lock built as controller-runtime builds it but under the
// identity "<replica>_<uuid>" instead of "<hostname>_<uuid>": every replica
// here shares the host name, and a pod's host name is its name, so the
// holder identity names the replica either way.
func (r *replica) leaderElection(options *ctrl.Options, cfg configapi.Configuration, rc *rest.Config) error {
	le := cfg.LeaderElection
	if le == nil || !ptr.Deref(le.LeaderElect, false) {
		return fmt.Errorf("cluster %q: replica %s: the HA configuration has no leaderElection", r.cluster, r.name)
	}
	id := r.name + "_" + string(uuid.NewUUID())
	lc := rest.AddUserAgent(rest.CopyConfig(rc), "leader-election")
	if options.RenewDeadline != nil {
		lc.Timeout = max(*options.RenewDeadline/2, time.Second)
	}
	core, err := corev1client.NewForConfig(lc)
	if err != nil {
		return err
	}
	coord, err := coordinationv1client.NewForConfig(lc)
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName, core, coord, resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return fmt.Errorf("cluster %q: replica %s: leader election lock: %w", r.cluster, r.name, err)
	}
	options.LeaderElection = true
	options.LeaderElectionResourceLockInterface = lock
	base, crash := context.WithCancel(context.Background())
	options.BaseContext = func() context.Context { return base }
	r.mu.Lock()
	r.identity = id
	if r.crash != nil {
		r.crash() // the previous start's
	}
	r.crash = crash
	r.mu.Unlock()
	return nil
}

// crashNow cancels every runnable of the current start at once.
func (r *replica) crashNow() {
	r.mu.Lock()
	crash := r.crash
	r.mu.Unlock()
	if crash != nil {
		crash()
	}
}

// roleTracker is cmd/kueue's setupRoleTracker: a RoleTracker over the
// manager's Elected channel when the replica runs leader election, else nil
// (a single Kueue: "standalone"). Kueue uses it to label logs and metrics
// with the replica's role.
func (r *replica) roleTracker(mgr manager.Manager, log logr.Logger) (*roletracker.RoleTracker, error) {
	if r == nil {
		return nil, nil
	}
	t := roletracker.NewRoleTracker(mgr.Elected())
	return t, mgr.Add(everyReplica(func(ctx context.Context) error {
		t.Start(ctx, log)
		<-ctx.Done()
		return nil
	}))
}

// everyReplica is a runnable that runs on every replica, leader or not.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

// addVisibility adds the replica's visibility server to mgr: it serves the
// queues of this replica, on every replica, for as long as mgr runs (or until
// stopVisibility).
func (r *replica) addVisibility(mgr manager.Manager, queues *qcache.Manager, cfg *configapi.Configuration) error {
	v, err := newVisibilityRunnable(r, queues, cfg)
	if err != nil {
		return fmt.Errorf("cluster %q: replica %s: visibility server: %w", r.cluster, r.name, err)
	}
	r.mu.Lock()
	r.vis = v
	r.mu.Unlock()
	return mgr.Add(v)
}

// stopVisibility stops the replica's visibility server and leaves the rest of
// the replica running (a broken visibility handler, for tests). Restarting the
// replica brings it back.
func (r *replica) stopVisibility() error {
	r.mu.Lock()
	v := r.vis
	r.mu.Unlock()
	if v == nil {
		return fmt.Errorf("cluster %q: replica %s has no visibility server running", r.cluster, r.name)
	}
	return v.stop()
}

// cuttableNet is a replica's network to its API server: kill cuts it (every
// open connection closed, new ones refused) before the replica stops, so
// that nothing it does while stopping reaches the cluster, as when a process
// dies: in particular it cannot release the leader Lease. start restores it.
type cuttableNet struct {
	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

var errNetworkCut = errors.New("replica killed: its network is cut")

func newCuttableNet() *cuttableNet { return &cuttableNet{conns: map[net.Conn]struct{}{}} }

// dial is a rest.Config Dial.
func (n *cuttableNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	cut := n.cut
	n.mu.Unlock()
	if cut {
		return nil, errNetworkCut
	}
	c, err := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut {
		c.Close()
		return nil, errNetworkCut
	}
	tc := &trackedConn{Conn: c, n: n}
	n.conns[tc] = struct{}{}
	return tc, nil
}

func (n *cuttableNet) setCut(cut bool) {
	n.mu.Lock()
	n.cut = cut
	var open []net.Conn
	if cut {
		for c := range n.conns {
			open = append(open, c)
		}
	}
	n.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	n    *cuttableNet
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.n.mu.Lock()
		delete(c.n.conns, c)
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}

// withNet returns rc dialling through n.
func withNet(rc *rest.Config, n *cuttableNet) *rest.Config {
	out := rest.CopyConfig(rc)
	out.Dial = n.dial
	return out
}

// replicaName is the name of the i-th replica of a cluster's Kueue.
func replicaName(i int) string { return fmt.Sprintf("kueue-%d", i) }

// replicaOfHolder returns the replica name a Lease holder identity names
// ("kueue-1_0f3c…" → "kueue-1"); for a pod it is the pod name.
func replicaOfHolder(holder string) string {
	name, _, _ := strings.Cut(holder, "_")
	return name
}
