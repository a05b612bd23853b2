package local

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/multikueue-testkit/testkit/topology"
)

// localCluster implements topology.Lifecycle.
type localCluster struct {
	name  string
	cp    *controlPlane
	kueue *kueueProcess

	mu         sync.Mutex
	execCancel context.CancelFunc
	execDone   chan error
}

// startAgent runs the owner garbage collector and, on workers, the job
// executor, in a manager of their own.
func (lc *localCluster) startAgent(ctx context.Context, worker bool, logPath string, owners []schema.GroupVersionKind) error {
	mgr, err := newAgentManager(lc.name, worker, lc.cp.configAs(lc.cp.agent), logPath, owners)
	if err != nil {
		return fmt.Errorf("cluster %q: agent: %w", lc.name, err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	lc.mu.Lock()
	lc.execCancel, lc.execDone = cancel, done
	lc.mu.Unlock()
	return nil
}

func (lc *localCluster) close() error {
	var errs []error
	lc.mu.Lock()
	cancel, done := lc.execCancel, lc.execDone
	lc.execCancel = nil
	lc.mu.Unlock()
	if cancel != nil {
		cancel()
		select {
		case <-done:
		case <-time.After(procStopTimeout):
			errs = append(errs, fmt.Errorf("cluster %q: agent did not stop within %s", lc.name, procStopTimeout))
		}
	}
	if lc.kueue != nil {
		errs = append(errs, lc.kueue.stop())
	}
	errs = append(errs, lc.cp.stop())
	return errors.Join(errs...)
}

// StopKueue implements topology.Lifecycle.
func (lc *localCluster) StopKueue(context.Context) error { return lc.kueue.stop() }

// StartKueue implements topology.Lifecycle.
func (lc *localCluster) StartKueue(ctx context.Context) error { return lc.kueue.start(ctx) }

// StopAPIServer implements topology.Lifecycle.
func (lc *localCluster) StopAPIServer(context.Context) error { return lc.cp.api.stop(procStopTimeout) }

// StartAPIServer implements topology.Lifecycle: same port, same etcd data.
func (lc *localCluster) StartAPIServer(ctx context.Context) error {
	lc.cp.api = lc.cp.newAPIServer()
	return lc.cp.startAPIServer(ctx)
}

var _ topology.Lifecycle = (*localCluster)(nil)
