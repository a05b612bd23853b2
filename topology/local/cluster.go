package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// localCluster implements topology.Lifecycle.
type localCluster struct {
	name string
	cp   *controlPlane
	// kueueBin is the cluster's Kueue, its real binary (Options.Kueue), when
	// it runs one replica.
	kueueBin *kueueBinary
	// ha, in HA mode, runs the cluster's Kueue as several replicas (then
	// kueueBin is nil); nil otherwise.
	ha *haCluster

	mu sync.Mutex
	// components are the in-process controllers besides Kueue (the agent,
	// JobSet, KubeRay), in start order; close stops them in reverse.
	components []*component
	// binaries are the operators' controller binaries (JobSet, KubeRay), in
	// start order; close stops them in reverse, before Kueue.
	binaries []*controllerBinary
	// procs are the worker's node-side processes (kube-scheduler, KWOK),
	// in start order; close stops them in reverse, first.
	procs []*process
	// rayHead answers the KubeRay operator's Ray dashboard requests (a worker
	// with a Ray integration); nil otherwise.
	rayHead *rayHead
}

// binary is the cluster's Kueue process whose configuration and version
// the topology publishes: the single one, or kueue-0 in HA mode.
func (lc *localCluster) binary() *kueueBinary {
	if lc.ha != nil && len(lc.ha.replicas) > 0 {
		return lc.ha.first()
	}
	return lc.kueueBin
}

// component is one in-process controller manager of a cluster, with a
// client identity and a log file of its own.
type component struct {
	name   string
	cancel context.CancelFunc
	done   chan error
}

// componentOptions describe a component's manager.
type componentOptions struct {
	cfg     *rest.Config
	logPath string
	scheme  *runtime.Scheme
	// webhook, when set, is the component's webhook server.
	webhook webhook.Server
}

// newComponentManager builds a component's manager: its log in logPath, no
// metrics or health servers, no leader election, controller names shared
// with other managers of the process allowed.
func newComponentManager(o componentOptions) (_ manager.Manager, err error) {
	logf, err := os.OpenFile(o.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			logf.Close() // the manager that would close it will not run
		}
	}()
	mgr, err := ctrl.NewManager(o.cfg, ctrl.Options{
		Scheme:                 o.scheme,
		Logger:                 zap.New(zap.WriteTo(logf)),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		PprofBindAddress:       "0",
		LeaderElection:         false,
		// Several managers in one process register controllers of the same name.
		Controller:    crconfig.Controller{SkipNameValidation: ptr.To(true)},
		WebhookServer: o.webhook,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return logf.Close() })); err != nil {
		return nil, err
	}
	return mgr, nil
}

// startComponent runs mgr until the cluster closes and waits (up to
// timeout) until its caches are synced and, when it has one, its webhook
// server listens.
func (lc *localCluster) startComponent(ctx context.Context, name string, mgr manager.Manager, server webhook.Server, timeout time.Duration) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	c := &component{name: name, cancel: cancel, done: done}
	lc.mu.Lock()
	lc.components = append(lc.components, c)
	lc.mu.Unlock()
	return poll.Until(ctx, timeout, fmt.Sprintf("cluster %q: the %s to start", lc.name, name), func(ctx context.Context) error {
		select {
		case err := <-done:
			done <- err
			return poll.Stop(fmt.Errorf("cluster %q: the %s exited: %v", lc.name, name, err))
		default:
		}
		syncCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(syncCtx) {
			return errors.New("caches not synced yet")
		}
		if server != nil {
			return server.StartedChecker()(nil)
		}
		return nil
	})
}

// track adds a started process (nil is skipped) for close to stop.
func (lc *localCluster) track(p *process) {
	if p == nil {
		return
	}
	lc.mu.Lock()
	lc.procs = append(lc.procs, p)
	lc.mu.Unlock()
}

func (lc *localCluster) close() error {
	var errs []error
	lc.mu.Lock()
	procs := lc.procs
	lc.procs = nil
	lc.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		errs = append(errs, procs[i].stop(procStopTimeout))
	}
	lc.mu.Lock()
	comps := lc.components
	lc.components = nil
	lc.mu.Unlock()
	for i := len(comps) - 1; i >= 0; i-- {
		c := comps[i]
		c.cancel()
		select {
		case err := <-c.done:
			if err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("cluster %q: %s: %w", lc.name, c.name, err))
			}
		case <-time.After(procStopTimeout):
			errs = append(errs, fmt.Errorf("cluster %q: the %s did not stop within %s", lc.name, c.name, procStopTimeout))
		}
	}
	lc.mu.Lock()
	bins := lc.binaries
	lc.binaries = nil
	lc.mu.Unlock()
	for i := len(bins) - 1; i >= 0; i-- {
		errs = append(errs, bins[i].stop())
	}
	lc.mu.Lock()
	head := lc.rayHead
	lc.rayHead = nil
	lc.mu.Unlock()
	errs = append(errs, head.close())
	errs = append(errs, lc.ha.close())
	if lc.kueueBin != nil {
		errs = append(errs, lc.kueueBin.stop())
	}
	errs = append(errs, lc.cp.stop())
	return errors.Join(errs...)
}

// StopKueue implements topology.Lifecycle.
func (lc *localCluster) StopKueue(ctx context.Context) error {
	if lc.ha != nil {
		return lc.ha.stopAll(ctx)
	}
	return lc.kueueBin.stop()
}

// StartKueue implements topology.Lifecycle.
func (lc *localCluster) StartKueue(ctx context.Context) error {
	if lc.ha != nil {
		return lc.ha.startAll(ctx)
	}
	return lc.kueueBin.start(ctx)
}

// StopAPIServer implements topology.Lifecycle.
func (lc *localCluster) StopAPIServer(context.Context) error { return lc.cp.api.stop(procStopTimeout) }

// StartAPIServer implements topology.Lifecycle: same port, same etcd data.
func (lc *localCluster) StartAPIServer(ctx context.Context) error {
	lc.cp.api = lc.cp.newAPIServer()
	return lc.cp.startAPIServer(ctx)
}

var _ topology.Lifecycle = (*localCluster)(nil)
