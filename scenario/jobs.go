package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

// JobTemplate describes one job a scenario submits, whatever its kind.
type JobTemplate struct {
	Kind            observe.Kind
	Name, Namespace string
	// Queue is the LocalQueue.
	Queue string
	// CPU and Memory requested by each pod.
	CPU, Memory string
	// RunFor is the run time on the worker (pods' sleep; the run-duration
	// annotation KWOK's Stage reads on the local topology).
	RunFor time.Duration
	// Fails makes the job fail.
	Fails bool
}

// Build returns the job object of the template's kind, built with package
// workload; an error names a kind it has no builder for.
func (j JobTemplate) Build() (client.Object, error) {
	switch j.Kind {
	case observe.KindJob:
		return build(j, workload.NewJob(j.Name, j.Namespace), (*workload.JobBuilder).Obj)
	case observe.KindJobSet:
		return build(j, workload.NewJobSet(j.Name, j.Namespace), (*workload.JobSetBuilder).Obj)
	case observe.KindRayJob:
		return build(j, workload.NewRayJob(j.Name, j.Namespace), (*workload.RayJobBuilder).Obj)
	case observe.KindPyTorchJob:
		return build(j, workload.NewPyTorchJob(j.Name, j.Namespace), (*workload.PyTorchJobBuilder).Obj)
	case observe.KindTFJob:
		return build(j, workload.NewTFJob(j.Name, j.Namespace), (*workload.TFJobBuilder).Obj)
	case observe.KindXGBoostJob:
		return build(j, workload.NewXGBoostJob(j.Name, j.Namespace), (*workload.XGBoostJobBuilder).Obj)
	case observe.KindPaddleJob:
		return build(j, workload.NewPaddleJob(j.Name, j.Namespace), (*workload.PaddleJobBuilder).Obj)
	case observe.KindJAXJob:
		return build(j, workload.NewJAXJob(j.Name, j.Namespace), (*workload.JAXJobBuilder).Obj)
	case observe.KindMPIJob:
		return build(j, workload.NewMPIJob(j.Name, j.Namespace), (*workload.MPIJobBuilder).Obj)
	case observe.KindAppWrapper:
		return build(j, workload.NewAppWrapper(j.Name, j.Namespace), (*workload.AppWrapperBuilder).Obj)
	case observe.KindTrainJob:
		return build(j, workload.NewTrainJob(j.Name, j.Namespace), (*workload.TrainJobBuilder).Obj)
	case observe.KindPod:
		return build(j, workload.NewPod(j.Name, j.Namespace), (*workload.PodBuilder).Obj)
	}
	return nil, fmt.Errorf("scenario: job kind %q: package workload has no builder for it (buildable: %v)", j.Kind, buildableKinds())
}

// templated is what every workload builder offers the templates.
type templated[B any] interface {
	Queue(string) B
	Requests(cpu, memory string) B
	RunFor(time.Duration) B
	Fails() B
	Err() error
}

// build applies j to b and returns the object obj makes of it.
func build[B templated[B], O client.Object](j JobTemplate, b B, obj func(B) O) (client.Object, error) {
	b.Queue(j.Queue).Requests(j.CPU, j.Memory).RunFor(j.RunFor)
	if j.Fails {
		b.Fails()
	}
	return obj(b), b.Err()
}

// buildableKinds are the job kinds JobTemplate.Build can build.
func buildableKinds() []observe.Kind {
	return []observe.Kind{observe.KindJob, observe.KindJobSet, observe.KindRayJob,
		observe.KindPyTorchJob, observe.KindTFJob, observe.KindXGBoostJob, observe.KindPaddleJob, observe.KindJAXJob, observe.KindMPIJob, observe.KindAppWrapper, observe.KindTrainJob, observe.KindPod}
}

// Kinds returns the job kinds the topology's Kueue integrations enable that
// the scenarios can build: batch/Job always, the others with their
// integrations.
func Kinds(env *Env) []observe.Kind {
	var out []observe.Kind
	for _, k := range observe.JobKindsFor(env.Topo.Spec.Kueue.Integrations) {
		if slices.Contains(buildableKinds(), k) {
			out = append(out, k)
		}
	}
	return out
}

// checkKinds validates requested kinds against the topology: each must be
// buildable and enabled by an integration. Empty means Kinds(env).
func checkKinds(env *Env, field string, kinds []observe.Kind) ([]observe.Kind, error) {
	if len(kinds) == 0 {
		return Kinds(env), nil
	}
	enabled := observe.JobKindsFor(env.Topo.Spec.Kueue.Integrations)
	for i, k := range kinds {
		if !slices.Contains(buildableKinds(), k) {
			return nil, fmt.Errorf("scenario: %s[%d]: %q has no builder (buildable: %v)", field, i, k, buildableKinds())
		}
		if !slices.Contains(enabled, k) {
			return nil, fmt.Errorf("scenario: %s[%d]: %q is not enabled by the topology's Kueue %s", field, i, k, env.Topo.Facts.Say(topology.FactIntegrations, env.Topo.Spec.Kueue.Integrations))
		}
	}
	return kinds, nil
}

// checkPrefix checks that names made from prefix ("<prefix>-jobset-12")
// are valid object names.
func checkPrefix(scenario, field, prefix string) error {
	if errs := validation.IsDNS1123Label(prefix + "-jobset-0"); len(errs) > 0 {
		return fmt.Errorf("scenario %s: %s: %q does not make valid job names: %s", scenario, field, prefix, errs[0])
	}
	return nil
}

// run is one scenario's run on an Env: a Checker judging topology-wide
// history from the run's start (Checker.Since), so that scenarios sharing a
// topology are each judged on their own time.
type run struct {
	env   *Env
	chk   *assert.Checker
	name  string
	start time.Time
}

func begin(env *Env, name string) (*run, error) {
	if env == nil || env.Topo == nil || env.Obs == nil || env.Check == nil {
		return nil, fmt.Errorf("scenario %s: the Env is not set up (use scenario.Observe)", name)
	}
	chk := *env.Check
	now := time.Now()
	if chk.Since.Before(now) {
		chk.Since = now
	}
	return &run{env: env, chk: &chk, name: name, start: now}, nil
}

func (r *run) errorf(format string, args ...any) error {
	return fmt.Errorf("scenario %s: "+format, append([]any{r.name}, args...)...)
}

// namespace is the namespace jobs go to by default.
func (r *run) namespace(ns string) string {
	if ns != "" {
		return ns
	}
	return r.env.Topo.Spec.Queues.Namespaces[0]
}

// build builds the templates.
func (r *run) build(tmpls []JobTemplate) ([]client.Object, error) {
	objs := make([]client.Object, len(tmpls))
	for i, t := range tmpls {
		if t.Queue == "" {
			t.Queue = r.env.Topo.Spec.Queues.LocalQueue
		}
		o, err := t.Build()
		if err != nil {
			return nil, r.errorf("%w", err)
		}
		objs[i] = o
	}
	return objs, nil
}

// submit creates objs on the manager, 32 at a time. Each error names the
// cluster and the object.
func (r *run) submit(ctx context.Context, objs []client.Object) error {
	return r.submitN(ctx, objs, 32)
}

// ref names a job object: "Job default/a".
func ref(o client.Object) string {
	k, ok := observe.JobKindOf(o)
	if !ok {
		k = observe.Kind(fmt.Sprintf("%T", o))
	}
	return fmt.Sprintf("%s %s/%s", k, o.GetNamespace(), o.GetName())
}

// check is one per-job assertion.
type check struct {
	name string
	fn   func(context.Context, client.Object) error
	// last: the check reads a final state without waiting for it, so it
	// runs once the object's other checks are done (judge).
	last bool
}

func (r *run) placementChecks() []check {
	return []check{
		{name: "ExactlyOnceAdmitted", fn: r.chk.ExactlyOnceAdmitted},
		{name: "NominationCleared", fn: r.chk.NominationCleared},
		{name: "LosersCleaned", fn: r.chk.LosersCleaned},
	}
}

func (r *run) runChecks() []check {
	return []check{
		{name: "Finished", fn: r.chk.Finished},
		{name: "StatusSynced", fn: r.chk.StatusSynced},
	}
}

// judge runs checks on every object and joins the failures, each object's
// in the checks' order. An object's checks run at once (up to 64 objects
// at a time), those marked last after the others: each waits on the
// recorded history for what it judges, so an object failing several
// checks costs one Checker timeout, not one per check.
func (r *run) judge(ctx context.Context, objs []client.Object, checks ...check) error {
	errs := make([][]error, len(objs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i, o := range objs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			es := make([]error, len(checks))
			var each sync.WaitGroup
			for j, c := range checks {
				if !c.last {
					each.Go(func() { es[j] = c.fn(ctx, o) })
				}
			}
			each.Wait()
			for j, c := range checks {
				if c.last {
					es[j] = c.fn(ctx, o)
				}
			}
			errs[i] = es
		})
	}
	wg.Wait()
	var all []error
	for _, es := range errs {
		all = append(all, es...)
	}
	return errors.Join(all...)
}

// idleKinds waits (up to timeout) until, for each job kind among objs
// other than batch/Job, a remote copy of one of its objects started on a
// worker, and returns the kinds none of whose copies started. batch/Job is
// never presumed idle: every cluster runs it.
func (r *run) idleKinds(ctx context.Context, objs []client.Object, timeout time.Duration) []observe.Kind {
	byKind := map[observe.Kind][]client.Object{}
	for _, o := range objs {
		if k, _ := observe.JobKindOf(o); k != observe.KindJob {
			byKind[k] = append(byKind[k], o)
		}
	}
	var idle []observe.Kind
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k, os := range byKind {
		wg.Go(func() {
			err := poll.Until(ctx, timeout, fmt.Sprintf("a %s to start on a worker", k), func(context.Context) error {
				for _, o := range os {
					evs, _ := r.env.Obs.History(k, o.GetNamespace(), o.GetName())
					for _, e := range evs {
						if e.Cluster != r.env.Topo.Manager.Name && e.Type == observe.JobStarted {
							return nil
						}
					}
				}
				return errors.New("none started")
			})
			if err != nil {
				mu.Lock()
				idle = append(idle, k)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(idle)
	return idle
}

// outcome returns the final state the manager's job object reached
// (observe.JobSucceeded or observe.JobFailed), "" if none.
func (r *run) outcome(o client.Object) observe.Type {
	k, _ := observe.JobKindOf(o)
	evs, _ := r.env.Obs.History(k, o.GetNamespace(), o.GetName())
	for _, e := range evs {
		if e.Cluster == r.env.Topo.Manager.Name && (o.GetUID() == "" || e.UID == o.GetUID()) && (e.Type == observe.JobSucceeded || e.Type == observe.JobFailed) {
			return e.Type
		}
	}
	return ""
}

// placement returns the worker each object's Workload was last placed on,
// from the manager's recorded status.clusterName; when the manager never
// recorded one, the worker that got MultiKueue's remote copy of the job
// object, with recorded false (see assert.Checker.PlacementRecorded); ""
// when neither.
func (r *run) placement(ctx context.Context, o client.Object) (worker string, recorded bool, err error) {
	key, err := r.workloadKey(ctx, o)
	if err != nil {
		return "", false, err
	}
	mgr := r.env.Topo.Manager.Name
	evs, _ := r.env.Obs.History(observe.KindWorkload, key.Namespace, key.Name)
	for _, e := range evs {
		if e.Cluster == mgr && e.ClusterName() != "" {
			worker, recorded = e.Values[0], true
		}
	}
	if recorded {
		return worker, true, nil
	}
	k, _ := observe.JobKindOf(o)
	jobs, _ := r.env.Obs.History(k, o.GetNamespace(), o.GetName())
	for _, e := range jobs {
		if e.Cluster != mgr && e.Type == observe.Created && observe.FromMultiKueue(e.Labels) {
			worker = e.Cluster
		}
	}
	return worker, false, nil
}

// placements returns where each object ran (placement) and the objects
// whose placement the manager never recorded.
func (r *run) placements(ctx context.Context, objs []client.Object) (map[string]string, []string) {
	out := map[string]string{}
	var unrecorded []string
	for _, ob := range objs {
		w, recorded, err := r.placement(ctx, ob)
		if err != nil {
			continue
		}
		if w != "" {
			out[ref(ob)] = w
		}
		if !recorded {
			unrecorded = append(unrecorded, ref(ob))
		}
	}
	return out, unrecorded
}

// workloadKey finds the manager Workload of a job object (by Kueue's
// job-uid label) in the Observer's cache.
func (r *run) workloadKey(ctx context.Context, o client.Object) (client.ObjectKey, error) {
	mgr := r.env.Topo.Manager.Name
	var key client.ObjectKey
	err := poll.Until(ctx, r.chk.Timeout, fmt.Sprintf("cluster %q: the Workload of %s", mgr, ref(o)), func(ctx context.Context) error {
		wl, err := observe.WorkloadOf(ctx, r.env.Obs.Reader(mgr), o.GetNamespace(), o.GetUID())
		if err != nil {
			return err
		}
		key = client.ObjectKeyFromObject(wl)
		return nil
	})
	return key, err
}

// jobOf returns o as a batch/Job, if it is one.
func jobOf(o client.Object) []*batchv1.Job {
	if j, ok := o.(*batchv1.Job); ok {
		return []*batchv1.Job{j}
	}
	return nil
}
