package scenario

import (
	"context"
	"fmt"
	"strings"
)

// StatusSyncOptions shape StatusSync.
type StatusSyncOptions struct {
	// Dispatch is the load: for each of its Kinds (default every kind the
	// topology's integrations enable) one job that succeeds and one that
	// fails, so Jobs and Fails must be unset. Defaults: NamePrefix
	// "statussync"; CPU "500m", Memory "256Mi"; RunFor 1s.
	Dispatch DispatchOptions
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
	d := o.Dispatch
	if err := d.use(r.name, "StatusSyncOptions.Dispatch", DispatchOptions{CPU: "500m", Memory: "256Mi"},
		map[string]string{"Jobs": "it submits one job that succeeds and one that fails of each kind", "Fails": "it builds one job of each kind to fail"}); err != nil {
		return DispatchResult{}, err
	}
	kinds, err := r.dispatchKinds(&d, "StatusSyncOptions.Dispatch")
	if err != nil {
		return DispatchResult{}, err
	}
	ns := r.namespace(d.Namespace)
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
	r.rep.Helper()
	return reported(r, ctx, StatusSync, o)
}
