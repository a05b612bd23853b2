package scenario

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
)

// StatusSyncOptions shape StatusSync.
type StatusSyncOptions struct {
	// Kinds to run; default every kind the topology's integrations enable
	// (Kinds).
	Kinds []observe.Kind
	// Namespace; default the topology's first queue namespace.
	Namespace string
	// NamePrefix for the jobs; default "statussync".
	NamePrefix string
	// RunFor is each job's run time on the worker; default 1s.
	RunFor time.Duration
	// StartTimeout as in DispatchOptions.
	StartTimeout time.Duration
}

// StatusSync is the status-synchronisation scenario: for each job kind it
// submits one job built to succeed and one built to fail (named
// <prefix>-<kind>-succeeds and -fails), all at once, and checks, besides
// what Dispatch checks, that each manager job reached the final state it
// was built for, the same as its remote copy's, with an identical final
// status (StatusSynced: Job counts; JobSet restarts and terminal state;
// RayJob deployment and job status). The error joins every failed check.
func StatusSync(ctx context.Context, env *Env, o StatusSyncOptions) (DispatchResult, error) {
	r, err := begin(env, "StatusSync")
	if err != nil {
		return DispatchResult{}, err
	}
	d := DispatchOptions{Namespace: o.Namespace, NamePrefix: o.NamePrefix, RunFor: o.RunFor, CPU: "500m", Memory: "256Mi",
		StartTimeout: o.StartTimeout}
	if err := d.defaults(r.name); err != nil {
		return DispatchResult{}, err
	}
	kinds, err := checkKinds(env, "StatusSyncOptions.Kinds", o.Kinds)
	if err != nil {
		return DispatchResult{}, err
	}
	ns := r.namespace(o.Namespace)
	var tmpls []JobTemplate
	for _, k := range kinds {
		for _, fails := range []bool{false, true} {
			outcome := "succeeds"
			if fails {
				outcome = "fails"
			}
			tmpls = append(tmpls, JobTemplate{Kind: k, Name: fmt.Sprintf("%s-%s-%s", d.NamePrefix, strings.ToLower(string(k)), outcome), Namespace: ns,
				CPU: d.CPU, Memory: d.Memory, RunFor: d.RunFor, Fails: fails})
		}
	}
	objs, err := r.build(tmpls)
	if err != nil {
		return DispatchResult{}, err
	}
	return r.dispatch(ctx, objs, d)
}

// StatusSync runs StatusSync and reports its error.
func (r *Runner) StatusSync(ctx context.Context, o StatusSyncOptions) (DispatchResult, bool) {
	r.h.Helper()
	res, err := StatusSync(ctx, r.env, o)
	return res, r.report(err)
}
