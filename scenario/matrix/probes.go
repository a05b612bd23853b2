package matrix

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

// The finding probes: each builds, on a real topology, the situation a
// known Kueue defect needs, and returns nil when MultiKueue behaved right
// (the defect did not show) or the assertion's failure naming it. Each
// removes what it created.

// probeForeignSameNameJob (kueue #11849): the first worker's queue is held,
// so it loses every workload; it has its own running Job (no queue, no
// MultiKueue label) with the name of a manager Job submitted next. Once the
// manager's Job finished on another worker, ForeignUntouched must pass and
// the worker's Job be the same object.
func probeForeignSameNameJob(ctx context.Context, env *scenario.Env) (err error) {
	const name = "mx-foreign"
	ns, queue := env.Topo.Spec.Queues.Namespaces[0], env.Topo.Spec.Queues.LocalQueue
	w := env.Topo.Workers[0]
	if len(env.Topo.Workers) < 2 {
		return &InapplicableError{Why: "needs two workers: one to lose, one to run the Job"}
	}
	if err := setStopPolicy(ctx, env.Topo, w, kueue.Hold); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, setStopPolicy(ctx, env.Topo, w, kueue.None)) }()
	own := workload.NewJob(name, ns).RunFor(time.Hour).Obj()
	own.Spec.Suspend = nil
	if err := w.Client.Create(ctx, own); err != nil {
		return fmt.Errorf("cluster %q: create the worker's own Job %s/%s: %w", w.Name, ns, name, err)
	}
	defer func() { err = errors.Join(err, removeAndWait(ctx, w, own)) }()
	if err := seen(ctx, env, w.Name, own, observe.JobStarted); err != nil {
		return err
	}
	c := *env.Check
	c.Since = time.Now()
	job := workload.NewJob(name, ns).Queue(queue).Requests("1", "1Gi").RunFor(500 * time.Millisecond).Obj()
	if err := env.Topo.Manager.Client.Create(ctx, job); err != nil {
		return fmt.Errorf("cluster %q: create Job %s/%s: %w", env.Topo.Manager.Name, ns, name, err)
	}
	defer func() { err = errors.Join(err, removeAndWait(ctx, env.Topo.Manager, job)) }()
	if err := c.Finished(ctx, job); err != nil {
		return err
	}
	// MultiKueue deletes by name before it dispatches and again once the
	// workload finished: by now the defect had every chance to show.
	return errors.Join(c.ForeignUntouched(ctx), sameObject(ctx, w, own))
}

// probeFinalStatusWhileSuspended (kueue #11867): a ValidatingAdmissionPolicy
// on the manager holds back the unsuspend of the manager's Job, as a slow or
// restarting manager would, while the remote Job runs and succeeds. Once the
// manager's Workload finished, StatusSynced must pass: the manager's Job
// shows the remote's final status.
func probeFinalStatusWhileSuspended(ctx context.Context, env *scenario.Env) (err error) {
	const name, policy = "mx-held", "mktk-matrix-hold-unsuspend"
	const holdLabel = "testkit.multikueue.x-k8s.io/hold-unsuspend"
	mgr := env.Topo.Manager
	ns, queue := env.Topo.Spec.Queues.Namespaces[0], env.Topo.Spec.Queues.LocalQueue
	msg := "the matrix holds this Job suspended"
	lift, err := denyUpdates(ctx, mgr, policy,
		admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
		fmt.Sprintf("has(object.metadata.labels) && %q in object.metadata.labels", holdLabel),
		"!(oldObject.spec.suspend == true && object.spec.suspend == false)", msg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, lift()) }()
	// The API server enforces a new policy once its informer has it: probe
	// with a dry-run unsuspend of a Job no queue takes.
	probe := workload.NewJob(name+"-probe", ns).Label(holdLabel, "true").Obj()
	if err := mgr.Client.Create(ctx, probe); err != nil {
		return fmt.Errorf("cluster %q: create Job %s/%s: %w", mgr.Name, ns, probe.Name, err)
	}
	defer func() { err = errors.Join(err, removeAndWait(ctx, mgr, probe)) }()
	err = poll.Until(ctx, 30*time.Second, fmt.Sprintf("cluster %q: the policy %s to deny unsuspending Job %s/%s", mgr.Name, policy, ns, probe.Name), func(ctx context.Context) error {
		p := &batchv1.Job{}
		if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(probe), p); err != nil {
			return err
		}
		p.Spec.Suspend = ptr.To(false)
		if err := mgr.Client.Update(ctx, p, client.DryRunAll); err != nil && strings.Contains(err.Error(), msg) {
			return nil
		} else {
			return fmt.Errorf("not enforced yet (update: %v)", err)
		}
	})
	if err != nil {
		return err
	}
	job := workload.NewJob(name, ns).Queue(queue).Requests("1", "1Gi").RunFor(500*time.Millisecond).Label(holdLabel, "true").Obj()
	if err := mgr.Client.Create(ctx, job); err != nil {
		return fmt.Errorf("cluster %q: create Job %s/%s: %w", mgr.Name, ns, name, err)
	}
	defer func() { err = errors.Join(err, removeAndWait(ctx, mgr, job)) }()
	if err := seenRemote(ctx, env, job, observe.JobSucceeded); err != nil {
		return err
	}
	c := *env.Check
	if err := c.Finished(ctx, job); err != nil {
		return err
	}
	// Fixed, the status arrives within seconds; the defect never sends it.
	c.Timeout = 30 * time.Second
	return c.StatusSynced(ctx, job)
}

// probeMergePatchedNominations: the External scenario whose nominator
// merge-patches status.nominatedClusterNames (scenario.NominateWithMergePatch):
// MultiKueue's server-side apply that records the placement was refused
// by v0.17 ("clusterName and nominatedClusterNames are mutually exclusive").
// The Checker waits 10 s with nothing progressing: the defect never ends.
func probeMergePatchedNominations(ctx context.Context, env *scenario.Env) error {
	c := *env.Check
	c.Timeout = 10 * time.Second
	short := &scenario.Env{Topo: env.Topo, Obs: env.Obs, Check: &c}
	res, err := scenario.External(ctx, short, scenario.ExternalOptions{
		Dispatch: scenario.DispatchOptions{Jobs: 1, NamePrefix: "mx-ext-merge"},
		Write:    scenario.NominateWithMergePatch,
	})
	for _, o := range res.Objects {
		err = errors.Join(err, removeAndWait(ctx, env.Topo.Manager, o))
	}
	return err
}

// setStopPolicy sets the stop policy of cluster cl's ClusterQueue and waits
// until its Active condition follows.
func setStopPolicy(ctx context.Context, topo *topology.Topology, cl *topology.Cluster, p kueue.StopPolicy) error {
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: topo.Spec.Queues.ClusterQueue}}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(cq), cq); err != nil {
			return err
		}
		cq.Spec.StopPolicy = ptr.To(p)
		return cl.Client.Update(ctx, cq)
	})
	if err != nil {
		return fmt.Errorf("cluster %q: set ClusterQueue %s's stopPolicy to %s: %w", cl.Name, cq.Name, p, err)
	}
	want := p == kueue.None
	return poll.Until(ctx, 30*time.Second, fmt.Sprintf("cluster %q: ClusterQueue %s to be Active=%t", cl.Name, cq.Name, want), func(ctx context.Context) error {
		if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(cq), cq); err != nil {
			return err
		}
		if apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive) != want {
			return errors.New("not yet")
		}
		return nil
	})
}

// denyUpdates installs a ValidatingAdmissionPolicy and its binding on cl
// that deny the UPDATEs of rule's resources matching match unless
// validation holds; lift removes both.
func denyUpdates(ctx context.Context, cl *topology.Cluster, name string, rule admissionregistrationv1.Rule, match, validation, message string) (lift func() error, err error) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       rule,
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "match", Expression: match}},
			Validations:     []admissionregistrationv1.Validation{{Expression: validation, Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	lift = func() error {
		var errs []error
		for _, o := range []client.Object{binding, policy} {
			if err := cl.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("cluster %q: delete %T %s: %w", cl.Name, o, name, err))
			}
		}
		return errors.Join(errs...)
	}
	for _, o := range []client.Object{policy, binding} {
		if err := cl.Client.Create(ctx, o); err != nil {
			return nil, errors.Join(fmt.Errorf("cluster %q: create %T %s: %w", cl.Name, o, name, err), lift())
		}
	}
	return lift, nil
}

// seen waits until the Observer recorded event t of job object obj on
// cluster.
func seen(ctx context.Context, env *scenario.Env, cluster string, obj client.Object, t observe.Type) error {
	kind, _ := observe.JobKindOf(obj)
	return poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: %s %s/%s to be %s", cluster, kind, obj.GetNamespace(), obj.GetName(), t), func(context.Context) error {
		evs, _ := env.Obs.History(kind, obj.GetNamespace(), obj.GetName())
		for _, e := range evs {
			if e.Cluster == cluster && e.Type == t {
				return nil
			}
		}
		return errors.New("not yet")
	})
}

// seenRemote waits until the Observer recorded event t of a remote copy of
// job object obj on any worker.
func seenRemote(ctx context.Context, env *scenario.Env, obj client.Object, t observe.Type) error {
	kind, _ := observe.JobKindOf(obj)
	mgr := env.Topo.Manager.Name
	return poll.Until(ctx, 2*time.Minute, fmt.Sprintf("a remote copy of %s %s/%s to be %s on a worker", kind, obj.GetNamespace(), obj.GetName(), t), func(context.Context) error {
		evs, _ := env.Obs.History(kind, obj.GetNamespace(), obj.GetName())
		for _, e := range evs {
			if e.Cluster != mgr && e.Type == t {
				return nil
			}
		}
		return errors.New("not yet")
	})
}

// sameObject reports whether cl still has the very object obj (same UID),
// not being deleted.
func sameObject(ctx context.Context, cl *topology.Cluster, obj client.Object) error {
	cur := obj.DeepCopyObject().(client.Object)
	if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return fmt.Errorf("cluster %q: the worker's own %T %s/%s: %w", cl.Name, obj, obj.GetNamespace(), obj.GetName(), err)
	}
	if cur.GetUID() != obj.GetUID() || cur.GetDeletionTimestamp() != nil {
		return fmt.Errorf("cluster %q: %s/%s is UID %s (deletion %v), want the worker's own %s untouched", cl.Name, obj.GetNamespace(), obj.GetName(), cur.GetUID(), cur.GetDeletionTimestamp(), obj.GetUID())
	}
	return nil
}

// removeAndWait deletes obj from cl (dropping its finalizers) and waits
// until it is gone.
func removeAndWait(ctx context.Context, cl *topology.Cluster, obj client.Object) error {
	return poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: %s/%s to be deleted", cl.Name, obj.GetNamespace(), obj.GetName()), func(ctx context.Context) error {
		cur := obj.DeepCopyObject().(client.Object)
		if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if len(cur.GetFinalizers()) > 0 {
			cur.SetFinalizers(nil)
			if err := cl.Client.Update(ctx, cur); err != nil {
				return err
			}
		}
		if err := cl.Client.Delete(ctx, cur, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return errors.New("still there")
	})
}
