package scenario

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// DispatchOptions are the load a scenario submits: how many jobs of which
// kinds, where, how large and how long. Dispatch and AllAtOnce take them
// whole; every other scenario's options hold them as their Dispatch field,
// with the scenario's own defaults (named on its options type) and an error
// naming any field the scenario does not use.
type DispatchOptions struct {
	// Jobs is how many jobs of each kind to submit; default 1.
	Jobs int
	// Kinds are the job kinds to submit, mixed (Dispatch only); default
	// every kind the topology's integrations enable (Kinds).
	Kinds []observe.Kind
	// Namespace; default the topology's first queue namespace.
	Namespace string
	// NamePrefix for the jobs; default the scenario's name in lower case.
	NamePrefix string
	// CPU and Memory requested by each pod; default the topology's
	// JobSize ("1" and "1Gi" on the local topology, "100m" and "64Mi" on
	// kind), unless the scenario names its own.
	CPU, Memory string
	// RunFor is each job's run time on the worker; default 1s.
	RunFor time.Duration
	// Fails makes every job fail (Dispatch only).
	Fails bool
	// StartTimeout bounds the wait, after the jobs were submitted, for one
	// remote copy of each kind to start; none starting is reported as
	// nothing running that kind on the workers. Default the topology's
	// Timeouts().Start (30 s on the local topology, minutes on kind and
	// AKS; topology.Options.Timeouts raises it for every scenario).
	StartTimeout time.Duration
}

// DispatchResult lists the jobs a dispatch created.
type DispatchResult struct {
	// Jobs are the batch/Jobs among Objects.
	Jobs []*batchv1.Job
	// Objects are every job object submitted, in submission order.
	Objects []client.Object
	// Placement maps each job ("Job default/dispatch-job-0") to the worker
	// its Workload was last placed on: the manager's status.clusterName, or
	// the worker that got the remote job where the manager recorded none.
	Placement map[string]string
	// Unrecorded lists the jobs whose manager Workload never got a
	// status.clusterName (assert.Checker.PlacementRecorded fails for them).
	// The scenarios do not count it as a failure: Kueue v0.19.2 loses the
	// record for short jobs under load while running them right, and the
	// placement checks judge what the workers did.
	Unrecorded []string
}

// PerWorker counts the placements per worker.
func (r DispatchResult) PerWorker() map[string]int {
	out := map[string]int{}
	for _, w := range r.Placement {
		out[w]++
	}
	return out
}

// use readies o, a scenario's Dispatch field (path names it in errors:
// "QuotaOptions.Dispatch"), for the scenario name: a field in unused
// (keyed by field name, valued by why) must be left zero, for the scenario
// would ignore it; every other zero field takes the scenario's default from
// def. defaults then applies the common ones.
func (o *DispatchOptions) use(name, path string, def DispatchOptions, unused map[string]string) error {
	set := map[string]bool{
		"Jobs": o.Jobs != 0, "Kinds": len(o.Kinds) > 0, "Namespace": o.Namespace != "", "NamePrefix": o.NamePrefix != "",
		"CPU": o.CPU != "", "Memory": o.Memory != "", "RunFor": o.RunFor != 0, "Fails": o.Fails, "StartTimeout": o.StartTimeout != 0,
	}
	for _, f := range slices.Sorted(maps.Keys(unused)) {
		if set[f] {
			return fmt.Errorf("scenario %s: %s.%s: %s does not use it (%s); leave it unset", name, path, f, name, unused[f])
		}
	}
	if o.Jobs == 0 {
		o.Jobs = def.Jobs
	}
	if len(o.Kinds) == 0 {
		o.Kinds = def.Kinds
	}
	o.Namespace = cmp.Or(o.Namespace, def.Namespace)
	o.NamePrefix = cmp.Or(o.NamePrefix, def.NamePrefix)
	o.CPU = cmp.Or(o.CPU, def.CPU)
	o.Memory = cmp.Or(o.Memory, def.Memory)
	o.RunFor = cmp.Or(o.RunFor, def.RunFor)
	o.StartTimeout = cmp.Or(o.StartTimeout, def.StartTimeout)
	return nil
}

// defaults applies the defaults every scenario shares, CPU and Memory from
// size (the topology's JobSize); path names o in errors
// ("DispatchOptions", "QuotaOptions.Dispatch").
func (o *DispatchOptions) defaults(name, path string, size topology.JobSize) error {
	if o.Jobs == 0 {
		o.Jobs = 1
	}
	if o.Jobs < 0 {
		return fmt.Errorf("scenario %s: %s.Jobs: %d is negative", name, path, o.Jobs)
	}
	if o.NamePrefix == "" {
		o.NamePrefix = strings.ToLower(name)
	}
	if err := checkPrefix(name, path+".NamePrefix", o.NamePrefix); err != nil {
		return err
	}
	if o.CPU == "" {
		o.CPU = size.CPU
	}
	if o.Memory == "" {
		o.Memory = size.Memory
	}
	for _, f := range []struct{ field, q string }{{"CPU", o.CPU}, {"Memory", o.Memory}} {
		if v, err := resource.ParseQuantity(f.q); err != nil || v.Sign() < 0 {
			return fmt.Errorf("scenario %s: %s.%s: %q is not a non-negative quantity", name, path, f.field, f.q)
		}
	}
	if o.RunFor == 0 {
		o.RunFor = time.Second
	}
	if o.RunFor < 0 {
		return fmt.Errorf("scenario %s: %s.RunFor: %s is negative", name, path, o.RunFor)
	}
	return nil
}

// templates returns Jobs jobs of each kind, interleaved (a, b, a, b, ...),
// named <prefix>-<kind>-<i>.
func (o DispatchOptions) templates(ns string, kinds []observe.Kind) []JobTemplate {
	var out []JobTemplate
	for i := range o.Jobs {
		for _, k := range kinds {
			out = append(out, JobTemplate{
				Kind: k, Name: fmt.Sprintf("%s-%s-%d", o.NamePrefix, strings.ToLower(string(k)), i), Namespace: ns,
				CPU: o.CPU, Memory: o.Memory, RunFor: o.RunFor, Fails: o.Fails,
			})
		}
	}
	return out
}

// Dispatch is the canonical dispatch scenario for every job kind at once:
// it submits Jobs jobs of each kind in Kinds to the manager concurrently
// (mixed), then checks for each that it was admitted on exactly one worker
// (ExactlyOnceAdmitted), that its nominations were cleared once placed
// (NominationCleared) and its losing copies deleted (LosersCleaned), that
// it finished (Finished) with the outcome it was built for and the manager
// job's final status identical to the remote one (StatusSynced); then that
// no ClusterQueue went over quota during the scenario (QuotaRespected,
// from the scenario's start) and nothing is left on the workers
// (NoOrphans). The error joins every failed check.
func Dispatch(ctx context.Context, env *Env, o DispatchOptions) (DispatchResult, error) {
	r, err := begin(env, "Dispatch")
	if err != nil {
		return DispatchResult{}, err
	}
	objs, err := r.dispatchObjects(&o, "DispatchOptions")
	if err != nil {
		return DispatchResult{}, err
	}
	return r.dispatch(ctx, objs, o)
}

// dispatchKinds applies d's defaults and returns the kinds it names (every
// enabled kind when none); path names d in errors ("DispatchOptions",
// "StressOptions.Dispatch").
func (r *run) dispatchKinds(d *DispatchOptions, path string) ([]observe.Kind, error) {
	if err := d.defaults(r.name, path, r.env.Topo.JobSize()); err != nil {
		return nil, err
	}
	return checkKinds(r.env, path+".Kinds", d.Kinds)
}

// dispatchObjects is dispatchKinds, then d's jobs of those kinds built.
func (r *run) dispatchObjects(d *DispatchOptions, path string) ([]client.Object, error) {
	kinds, err := r.dispatchKinds(d, path)
	if err != nil {
		return nil, err
	}
	return r.build(d.templates(r.namespace(d.Namespace), kinds))
}

// batchJobs applies d's defaults and builds its batch/Jobs, for the
// scenarios that submit no other kind; path names d in errors.
func (r *run) batchJobs(d *DispatchOptions, path string) ([]client.Object, error) {
	if err := d.defaults(r.name, path, r.env.Topo.JobSize()); err != nil {
		return nil, err
	}
	return r.build(d.templates(r.namespace(d.Namespace), []observe.Kind{observe.KindJob}))
}

// dispatch submits objs and judges them as Dispatch does.
func (r *run) dispatch(ctx context.Context, objs []client.Object, o DispatchOptions) (DispatchResult, error) {
	res := DispatchResult{Objects: objs, Placement: map[string]string{}}
	for _, ob := range objs {
		if j, ok := ob.(*batchv1.Job); ok {
			res.Jobs = append(res.Jobs, j)
		}
	}
	if err := r.submit(ctx, objs); err != nil {
		return res, err
	}
	var errs []error
	start := cmp.Or(o.StartTimeout, r.env.Topo.Timeouts().Start)
	for _, k := range r.idleKinds(ctx, objs, start) {
		errs = append(errs, r.errorf("no %s started on its worker within %s of being submitted (the start timeout: DispatchOptions.StartTimeout, else topology.Options.Timeouts.Start): does anything run %ss on the workers?", k, start, k))
	}
	// Finished first: the placement checks then judge a complete history
	// (with MultiKueueWaitForWorkloadAdmitted off, a workload is placed
	// before the winner's copy is admitted).
	errs = append(errs, r.judge(ctx, objs, check{name: "Finished", fn: r.chk.Finished}))
	errs = append(errs, r.judge(ctx, objs, r.placementChecks()...))
	res.Placement, res.Unrecorded = r.placements(ctx, objs)
	errs = append(errs, r.judge(ctx, objs, check{name: "StatusSynced", fn: r.chk.StatusSynced}, r.outcomeCheck()))
	errs = append(errs, r.chk.QuotaRespected(ctx), r.chk.NoOrphans(ctx))
	return res, errors.Join(errs...)
}

// outcomeCheck checks that the manager's job ended as it was built to:
// failed with the outcome annotation set to Failed, else succeeded.
func (r *run) outcomeCheck() check {
	return check{name: "outcome", last: true, fn: func(_ context.Context, o client.Object) error {
		want := observe.JobSucceeded
		if o.GetAnnotations()[topology.AnnotationOutcome] == topology.OutcomeFailed {
			want = observe.JobFailed
		}
		if got := r.outcome(o); got != want {
			if got == "" {
				got = "no final state"
			}
			return r.errorf("cluster %q: %s ended with %s, built to end %s", r.env.Topo.Manager.Name, ref(o), got, want)
		}
		return nil
	}}
}

// Dispatch runs Dispatch and reports its error.
func (r *Runner) Dispatch(ctx context.Context, o DispatchOptions) (DispatchResult, bool) {
	r.rep.Helper()
	return reported(r, ctx, Dispatch, o)
}
