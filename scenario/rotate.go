package scenario

import (
	"context"
	"errors"
	"time"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/observe"
)

// DefaultRotationOverlap is how long RotateCredentials keeps the old
// identity valid after writing the new one, as a rotation with an overlap
// does, before revoking it.
const DefaultRotationOverlap = 5 * time.Second

// RotateOptions shape RotateCredentials.
type RotateOptions struct {
	// Worker whose credentials are rotated; default the worker running the
	// most of the scenario's Jobs once they are all placed.
	Worker string
	// Dispatch is the load running through the rotation, batch/Jobs only,
	// with the defaults of OutageOptions.Dispatch (NamePrefix "rotate"): its
	// Jobs run 10 s, so the rotated worker's are in flight at the rotation
	// and end after the revocation.
	Dispatch DispatchOptions
	// Overlap is how long both identities stay valid; default
	// DefaultRotationOverlap. The old one is revoked after it.
	Overlap time.Duration
	// Identity shapes the new identity (its name, rights, expiry).
	Identity connect.RotateOptions
}

// RotateResult is what RotateCredentials saw.
type RotateResult struct {
	DispatchResult
	// Worker is the worker whose credentials were rotated.
	Worker string
	// Old and New are the identities MultiKueue used on it before and after.
	Old, New string
	// Source is where the new credentials were written on the manager.
	Source string
	// Rotated and Revoked are when the new credentials were written and the
	// old identity's token was refused by the worker.
	Rotated, Revoked time.Time
	// InFlight are the Jobs running on Worker at the rotation.
	InFlight []string
	// Credentials is WorkerCredentials' check of Worker after the
	// revocation.
	Credentials assert.CredentialCheck
}

// RotateCredentials is the credential-rotation stress: while Jobs run, the
// credentials MultiKueue uses for one worker are replaced with a new
// identity (connect.Rotate: a new worker ServiceAccount with the same
// rights, its token written into the kubeconfig Secret, or into the token
// Secret a ClusterProfile's access provider names), and after Overlap the
// old identity is revoked (its ServiceAccount deleted; connect's Revoke
// returns once the worker refuses its token). It needs no Lifecycle and
// runs on every provider. It checks:
//
//   - the worker's MultiKueueCluster does not go Active=False from the
//     rotation on (a rotation is not an outage);
//   - WorkerCredentials: the manager's credentials for the worker are the
//     new identity, with every right MultiKueue uses; the old token is
//     refused;
//   - no workload disrupted: for every Job ExactlyOnceAdmitted,
//     NominationCleared, LosersCleaned, Finished, StatusSynced and the
//     outcome (the in-flight Jobs end after the revocation, so MultiKueue
//     must have read their end with the new credentials); QuotaRespected
//     and NoOrphans.
func RotateCredentials(ctx context.Context, env *Env, o RotateOptions) (RotateResult, error) {
	var res RotateResult
	r, err := begin(env, "RotateCredentials")
	if err != nil {
		return res, err
	}
	d := o.Dispatch
	if err := d.use(r.name, "RotateOptions.Dispatch", DispatchOptions{Jobs: 2 * len(env.Topo.Workers), NamePrefix: "rotate", Memory: "256Mi", RunFor: 10 * time.Second},
		map[string]string{"Kinds": "it submits batch/Jobs only", "Fails": "its Jobs must succeed to be judged undisrupted", "StartTimeout": "its waits are bounded by the Checker's Timeout"}); err != nil {
		return res, err
	}
	if o.Overlap < 0 {
		return res, r.errorf("RotateOptions.Overlap: %s is negative", o.Overlap)
	}
	if o.Overlap == 0 {
		o.Overlap = DefaultRotationOverlap
	}
	if _, err := r.outageCandidates(o.Worker, "RotateOptions.Worker"); err != nil {
		return res, err
	}
	objs, worker, inFlight, err := r.loadOne(ctx, &d, "RotateOptions.Dispatch", o.Worker)
	res.Objects = objs
	if err != nil {
		return res, err
	}
	res.Worker = worker.Name
	for _, ob := range inFlight {
		res.InFlight = append(res.InFlight, ref(ob))
	}
	spec := env.Topo.Spec
	rot, err := connect.Rotate(ctx, env.Topo.Manager, worker, spec.Kueue.Namespace, spec.Kueue.Integrations, o.Identity)
	if err != nil {
		return res, r.errorf("%w", err)
	}
	res.Rotated, res.Old, res.New, res.Source = time.Now(), rot.Old, rot.New, rot.Source
	// The overlap is the scenario's own timing (both identities valid for
	// a while, as a rotation gives its users), not a wait for state.
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(o.Overlap):
	}
	var errs []error
	if err := rot.Revoke(ctx); err != nil {
		errs = append(errs, r.errorf("%w", err))
	} else {
		res.Revoked = time.Now()
	}
	errs = append(errs, r.judge(ctx, objs, append(append(r.placementChecks(), r.runChecks()...), r.outcomeCheck())...))
	evs, _ := env.Obs.History(observe.KindMultiKueueCluster, "", worker.Name)
	for _, e := range evs {
		if e.Type == observe.ClusterInactive && e.Time.After(res.Rotated) {
			errs = append(errs, r.errorf("MultiKueueCluster %s went Active=False at %s, %s after its credentials were rotated to %s (written to %s): %s",
				worker.Name, stamp(e.Time), e.Time.Sub(res.Rotated).Round(time.Millisecond), rot.New, rot.Source, e.Detail))
		}
	}
	errs = append(errs, r.credentials(ctx, &res, rot))
	errs = append(errs, r.chk.QuotaRespected(ctx), r.chk.NoOrphans(ctx))
	res.Placement, res.Unrecorded = r.placements(ctx, objs)
	for _, ob := range objs {
		res.Jobs = append(res.Jobs, jobOf(ob)...)
	}
	return res, errors.Join(errs...)
}

// credentials checks that the manager's credentials for the rotated worker
// are the new identity with every right, and that the old is refused.
func (r *run) credentials(ctx context.Context, res *RotateResult, rot *connect.Rotation) error {
	var errs []error
	for _, c := range r.chk.WorkerCredentials(ctx) {
		if c.Worker != res.Worker {
			continue
		}
		res.Credentials = c
		switch {
		case c.NotChecked != "":
			errs = append(errs, r.errorf("the credentials for %s could not be checked: %s", c.Worker, c.NotChecked))
		case c.User != rot.New:
			errs = append(errs, r.errorf("the credentials in %s are %q, want the new identity %q", c.Source, c.User, rot.New))
		}
		for _, p := range c.Problems {
			errs = append(errs, r.errorf("the new credentials for %s: %s", c.Worker, p))
		}
	}
	if res.Credentials.Worker == "" {
		errs = append(errs, r.errorf("WorkerCredentials checked no credentials for %s", res.Worker))
	}
	if err := rot.OldRefused(ctx); err != nil {
		errs = append(errs, r.errorf("%w", err))
	}
	return errors.Join(errs...)
}

// RotateCredentials runs RotateCredentials and reports its error.
func (r *Runner) RotateCredentials(ctx context.Context, o RotateOptions) (RotateResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, RotateCredentials, o)
}
