package scenario

import (
	"context"
	"time"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/topology"
)

// DisconnectOptions shape Disconnect.
type DisconnectOptions struct {
	// Worker whose connection is cut; default the worker running the most
	// of the scenario's Jobs once they are all placed.
	Worker string
	// Dispatch is the load submitted before the cut, batch/Jobs only, with
	// the defaults of OutageOptions.Dispatch.
	Dispatch DispatchOptions
	// RedispatchBound: see DefaultRedispatchBound.
	RedispatchBound time.Duration
	// Address the worker's connection points at while cut; default
	// connect.UnreachableAddress (nothing listens there).
	Address string
}

// Disconnect is the lost-worker scenario without process control: it needs
// no Cluster.Lifecycle, so it runs on every provider (local, existing,
// kind, CAPZ). Where WorkerOutage stops the worker's API server, Disconnect
// makes the manager's Kueue lose the worker through the connection it uses:
// connect.Sever points the server address in the kubeconfig Secret or the
// ClusterProfile its MultiKueueCluster names at an unreachable address (as
// Kueue's own e2e tests break a connection), credentials untouched; this is
// a lost worker, not a missing Secret, which Kueue handled differently
// until kubernetes-sigs/kueue#13188. Restoring writes the connection back.
//
// The worker itself runs on, as a partitioned cluster does: its Jobs keep
// running and may finish while the manager cannot see them. Kueue holds
// them until workerLostTimeout after their placement and then re-dispatches
// them, so a Job in flight at the cut can run on both sides of the
// partition; the checks are the same as WorkerOutage's and judge each
// admission cycle (the re-dispatch is a new one): ClusterInactive, each
// in-flight Job held and re-dispatched, ClusterActive once restored, and
// for every Job ExactlyOnceAdmitted, NominationCleared, LosersCleaned,
// Finished, StatusSynced and the outcome; QuotaRespected and NoOrphans (the
// lost worker's stale copies removed once it is reachable again). The
// result's Stopped and Restarted are when the connection was cut and
// restored.
func Disconnect(ctx context.Context, env *Env, o DisconnectOptions) (OutageResult, error) {
	r, err := begin(env, "Disconnect")
	if err != nil {
		return OutageResult{}, err
	}
	ready := func() error {
		_, err := r.outageCandidates(o.Worker, "DisconnectOptions.Worker")
		return err
	}
	oo := OutageOptions{Worker: o.Worker, Dispatch: o.Dispatch, RedispatchBound: o.RedispatchBound}
	return r.lose(ctx, oo, "DisconnectOptions", ready, func(ctx context.Context, victim *topology.Cluster) (func(context.Context) error, error) {
		s, err := connect.Sever(ctx, env.Topo.Manager, env.Topo.Spec.Kueue.Namespace, victim.Name, o.Address)
		if err != nil {
			return nil, r.errorf("cut the connection to %q: %w", victim.Name, err)
		}
		return func(ctx context.Context) error {
			if err := s.Restore(ctx); err != nil {
				return r.errorf("restore the connection to %q: %w", victim.Name, err)
			}
			return nil
		}, nil
	})
}

// Disconnect runs Disconnect and reports its error.
func (r *Runner) Disconnect(ctx context.Context, o DisconnectOptions) (OutageResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, Disconnect, o)
}
