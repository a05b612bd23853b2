package topology

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
)

// setupMultiKueue creates, as the Kueue docs describe: on each worker the
// mirrored namespaces, ResourceFlavor, ClusterQueue and LocalQueues; on the
// manager one MultiKueueCluster per worker, a MultiKueueConfig, the MultiKueue
// AdmissionCheck and a ClusterQueue that uses it. Then it waits for Active.
func (t *Topology) setupMultiKueue(ctx context.Context) error {
	s := t.Spec
	fmt.Fprintf(s.Progress, "topology: connecting %d workers with %s\n", len(t.Workers), s.Connector.Name())
	sources := make([]kueue.ClusterSource, len(t.Workers))
	errs := make([]error, len(t.Workers)+1)
	var wg sync.WaitGroup
	for i, w := range t.Workers {
		wg.Go(func() {
			if err := t.setupQueues(ctx, w, nil); err != nil {
				errs[i] = err
				return
			}
			src, err := s.Connector.Connect(ctx, ConnectRequest{
				Manager: t.Manager, Worker: w, KueueNamespace: s.Kueue.Namespace, Integrations: s.Kueue.Integrations,
			})
			if err != nil {
				errs[i] = fmt.Errorf("connector %s: worker %q: %w", s.Connector.Name(), w.Name, err)
				return
			}
			sources[i] = src
		})
	}
	wg.Go(func() { errs[len(t.Workers)] = t.ensureNamespaces(ctx, t.Manager) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("topology: %w", err)
	}

	mgr := t.Manager
	for i, w := range t.Workers {
		mkc := &kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: w.Name}}
		if err := apply(ctx, mgr, mkc, func() { mkc.Spec.ClusterSource = sources[i] }); err != nil {
			return err
		}
	}
	mkcfg := &kueue.MultiKueueConfig{ObjectMeta: metav1.ObjectMeta{Name: s.Queues.MultiKueueConfig}}
	if err := apply(ctx, mgr, mkcfg, func() { mkcfg.Spec.Clusters = append([]string(nil), s.WorkerNames...) }); err != nil {
		return err
	}
	ac := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: s.Queues.AdmissionCheck}}
	if err := apply(ctx, mgr, ac, func() {
		ac.Spec.ControllerName = kueue.MultiKueueControllerName
		ac.Spec.Parameters = &kueue.AdmissionCheckParametersReference{
			APIGroup: kueue.SchemeGroupVersion.Group, Kind: "MultiKueueConfig", Name: s.Queues.MultiKueueConfig,
		}
	}); err != nil {
		return err
	}
	if err := t.setupQueues(ctx, mgr, []kueue.AdmissionCheckReference{kueue.AdmissionCheckReference(s.Queues.AdmissionCheck)}); err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	fmt.Fprintf(s.Progress, "topology: waiting up to %s for MultiKueue to become Active\n", s.ReadyTimeout)
	return t.WaitActive(ctx)
}

// ensureNamespaces creates Kueue's namespace and the queue namespaces.
func (t *Topology) ensureNamespaces(ctx context.Context, c *Cluster) error {
	names := append([]string{t.Spec.Kueue.Namespace}, t.Spec.Queues.Namespaces...)
	for _, n := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if err := apply(ctx, c, ns, func() {}); err != nil {
			return err
		}
	}
	return nil
}

// setupQueues creates the namespaces, ResourceFlavor, ClusterQueue (with the
// cluster's quota and the given checks) and LocalQueues on c.
func (t *Topology) setupQueues(ctx context.Context, c *Cluster, checks []kueue.AdmissionCheckReference) error {
	s := t.Spec
	if err := t.ensureNamespaces(ctx, c); err != nil {
		return err
	}
	rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: s.Queues.ResourceFlavor}}
	mutateRF := func() {}
	if s.TAS != nil {
		tas := s.TAS.WithDefaults()
		topo := &kueue.Topology{ObjectMeta: metav1.ObjectMeta{Name: tas.Topology}}
		if err := apply(ctx, c, topo, func() {
			if len(topo.Spec.Levels) == 0 { // immutable once set
				for _, l := range tas.Levels {
					topo.Spec.Levels = append(topo.Spec.Levels, kueue.TopologyLevel{NodeLabel: l})
				}
			}
		}); err != nil {
			return err
		}
		mutateRF = func() {
			rf.Spec.NodeLabels = tas.NodeLabels
			rf.Spec.TopologyName = ptr.To(kueue.TopologyReference(tas.Topology))
		}
	}
	if err := apply(ctx, c, rf, mutateRF); err != nil {
		return err
	}
	quota := s.Quotas[c.Name]
	names := make([]corev1.ResourceName, 0, len(quota))
	for n := range quota {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: s.Queues.ClusterQueue}}
	if err := apply(ctx, c, cq, func() {
		fq := kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(s.Queues.ResourceFlavor)}
		for _, n := range names {
			fq.Resources = append(fq.Resources, kueue.ResourceQuota{Name: n, NominalQuota: quota[n]})
		}
		cq.Spec.ResourceGroups = []kueue.ResourceGroup{{CoveredResources: names, Flavors: []kueue.FlavorQuotas{fq}}}
		cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
		cq.Spec.AdmissionChecksStrategy = nil
		if len(checks) > 0 {
			st := &kueue.AdmissionChecksStrategy{}
			for _, ch := range checks {
				st.AdmissionChecks = append(st.AdmissionChecks, kueue.AdmissionCheckStrategyRule{Name: ch})
			}
			cq.Spec.AdmissionChecksStrategy = st
		}
	}); err != nil {
		return err
	}
	for _, ns := range s.Queues.Namespaces {
		lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: s.Queues.LocalQueue, Namespace: ns}}
		if err := apply(ctx, c, lq, func() { lq.Spec.ClusterQueue = kueue.ClusterQueueReference(s.Queues.ClusterQueue) }); err != nil {
			return err
		}
	}
	return nil
}

// apply creates obj on c, or updates it with mutate when it exists. The error
// names the cluster and the object.
//
// An AlreadyExists or Conflict answer is tried again (three attempts in
// all): the object appeared, or changed, between the read and the write.
// Seen once, starting 1 + 19 clusters with GOMEMLIMIT on every API server
// ("resourceflavors ... already exists" right after a read that found none);
// the likely cause is an overloaded API server storing a create and still
// answering it with an error client-go repeats. The next attempt reads the
// object and updates it.
func apply(ctx context.Context, c *Cluster, obj client.Object, mutate func()) error {
	var err error
	for range 3 {
		_, err = controllerutil.CreateOrUpdate(ctx, c.Client, obj, func() error { mutate(); return nil })
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("cluster %q: apply %s %s: %w", c.Name, kindOf(c, obj), objectName(obj), err)
	}
	return nil
}

func kindOf(c *Cluster, obj client.Object) string {
	if gvk, err := c.Client.GroupVersionKindFor(obj); err == nil {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", obj)
}

func objectName(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// WaitActive waits, up to Spec.ReadyTimeout, until every MultiKueueCluster,
// the AdmissionCheck and every ClusterQueue are Active. On timeout the error
// lists each object that is not, with its condition reason and message.
func (t *Topology) WaitActive(ctx context.Context) error {
	return poll.Until(ctx, t.Spec.ReadyTimeout, "MultiKueue to become Active", func(ctx context.Context) error {
		return t.ActiveProblems(ctx)
	})
}

// ActiveProblems returns nil when the MultiKueue setup is Active, else an error
// listing every object that is not: each worker's MultiKueueCluster, the
// AdmissionCheck and the manager's ClusterQueue, and on each worker the
// mirrored LocalQueues and the ClusterQueue they point at.
func (t *Topology) ActiveProblems(ctx context.Context) error {
	var problems []string
	s := t.Spec
	check := func(c *Cluster, obj client.Object, conds func() []metav1.Condition) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			problems = append(problems, fmt.Sprintf("cluster %q %s %s: %v", c.Name, kindOf(c, obj), objectName(obj), err))
			return
		}
		cond := apimeta.FindStatusCondition(conds(), "Active")
		switch {
		case cond == nil:
			problems = append(problems, fmt.Sprintf("cluster %q %s %s: no Active condition yet", c.Name, kindOf(c, obj), objectName(obj)))
		case cond.Status != metav1.ConditionTrue:
			problems = append(problems, fmt.Sprintf("cluster %q %s %s: Active=%s reason=%s message=%q",
				c.Name, kindOf(c, obj), objectName(obj), cond.Status, cond.Reason, cond.Message))
		}
	}
	for _, w := range t.Workers {
		mkc := &kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: w.Name}}
		check(t.Manager, mkc, func() []metav1.Condition { return mkc.Status.Conditions })
	}
	ac := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: s.Queues.AdmissionCheck}}
	check(t.Manager, ac, func() []metav1.Condition { return ac.Status.Conditions })
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: s.Queues.ClusterQueue}}
	check(t.Manager, cq, func() []metav1.Condition { return cq.Status.Conditions })
	for _, w := range t.Workers {
		// A worker's ClusterQueue is the one its mirrored LocalQueues point
		// at: its name may differ from the manager's on clusters set up by
		// others.
		seen := map[string]bool{}
		for _, ns := range s.Queues.Namespaces {
			lq := &kueue.LocalQueue{}
			if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Queues.LocalQueue}, lq); err != nil {
				problems = append(problems, fmt.Sprintf("cluster %q LocalQueue %s/%s: %v", w.Name, ns, s.Queues.LocalQueue, err))
				continue
			}
			name := string(lq.Spec.ClusterQueue)
			if seen[name] {
				continue
			}
			seen[name] = true
			wcq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}
			check(w, wcq, func() []metav1.Condition { return wcq.Status.Conditions })
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}
