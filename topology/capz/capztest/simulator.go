package capztest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/multikueue-testkit/testkit/topology/capz"
)

// ClusterFinalizer is the finalizer the Simulator puts on each Cluster, as
// CAPI's Cluster controller does; it is removed once the Cluster's
// MachinePools and kubeconfig Secret are gone.
const ClusterFinalizer = "cluster.cluster.x-k8s.io"

// HeldReason is the reason of a condition the Simulator holds False.
const HeldReason = "HeldBySimulator"

// Simulator plays CAPI and CAPZ for the Clusters with a spec.topology on a
// management cluster. For each such Cluster it
//
//   - adds ClusterFinalizer;
//   - creates a MachinePool "<cluster>-<pool>" per entry of
//     spec.topology.workers.machinePools, with the labels CAPI's topology
//     controller sets (cluster-name, topology owned, pool-name), the pool's
//     annotations, and replicas from the topology (else the autoscaler
//     min-size annotation, else 1, as CAPI's MachinePool webhook defaults
//     them); its status says that many replicas are ready;
//   - writes the kubeconfig Secret "<cluster>-kubeconfig" (key "value",
//     type cluster.x-k8s.io/secret) with the kubeconfig given for the
//     Cluster's name, if any;
//   - sets the Cluster's InfrastructureReady, ControlPlaneInitialized and
//     ControlPlaneAvailable conditions True (ControlPlane* False while no
//     kubeconfig is known for it), except a condition held with
//     HoldCondition, which stays False;
//   - on deletion, deletes the MachinePools and the Secret, then removes
//     the finalizer, unless HoldDeletion holds the Cluster.
type Simulator struct {
	c      client.Client
	cancel context.CancelFunc
	done   chan error

	mu           sync.Mutex
	kubeconfigs  map[string][]byte
	held         map[string]string
	holdDeletion map[string]bool
	stopped      bool
}

// Start runs a Simulator against the management cluster of cfg until Stop.
// kubeconfigs maps a Cluster's name to the kubeconfig its Secret gets (a
// local cluster's, standing in for the AKS cluster).
func Start(ctx context.Context, cfg *rest.Config, kubeconfigs map[string][]byte) (*Simulator, error) {
	c, err := client.New(rest.CopyConfig(cfg), client.Options{})
	if err != nil {
		return nil, fmt.Errorf("capztest: %w", err)
	}
	s := &Simulator{c: c, kubeconfigs: map[string][]byte{}, held: map[string]string{}, holdDeletion: map[string]bool{}, done: make(chan error, 1)}
	for k, v := range kubeconfigs {
		s.kubeconfigs[k] = v
	}
	mgr, err := manager.New(rest.CopyConfig(cfg), manager.Options{
		Logger:                 logr.Discard(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             crconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("capztest: manager: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("capztest-cluster").
		For(newObject(capz.ClusterGVK)).
		Owns(newObject(capz.MachinePoolGVK)).
		WithLogConstructor(func(*reconcile.Request) logr.Logger { return logr.Discard() }).
		Complete(reconcile.Func(s.reconcile))
	if err != nil {
		return nil, fmt.Errorf("capztest: controller: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() { s.done <- mgr.Start(runCtx) }()
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		return nil, errors.Join(errors.New("capztest: the simulator's cache did not sync within a minute"), s.Stop())
	}
	return s, nil
}

// Stop stops the Simulator and waits for it; safe to call again.
func (s *Simulator) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	return <-s.done
}

// SetKubeconfig sets the kubeconfig the Secret of Cluster name gets.
func (s *Simulator) SetKubeconfig(name string, kubeconfig []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kubeconfigs[name] = kubeconfig
}

// HoldCondition keeps condition (one of capz.ReadyConditions) False on
// Cluster name; "" releases it.
func (s *Simulator) HoldCondition(name, condition string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if condition == "" {
		delete(s.held, name)
		return
	}
	s.held[name] = condition
}

// HoldDeletion keeps the finalizer on Cluster name while hold is true, so
// that its deletion never finishes.
func (s *Simulator) HoldDeletion(name string, hold bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdDeletion[name] = hold
}

func (s *Simulator) state(name string) (kubeconfig []byte, held string, holdDeletion bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kubeconfigs[name], s.held[name], s.holdDeletion[name]
}

// requeue brings a Cluster back while something it waits on (a hold, a
// MachinePool going away) may change without an event.
const requeue = 200 * time.Millisecond

func (s *Simulator) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	u := newObject(capz.ClusterGVK)
	if err := s.c.Get(ctx, req.NamespacedName, u); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if _, ok, _ := unstructured.NestedMap(u.Object, "spec", "topology"); !ok {
		return reconcile.Result{}, nil
	}
	kubeconfig, held, holdDeletion := s.state(u.GetName())
	if u.GetDeletionTimestamp() != nil {
		return s.delete(ctx, u, holdDeletion)
	}
	if !controllerutil.ContainsFinalizer(u, ClusterFinalizer) {
		controllerutil.AddFinalizer(u, ClusterFinalizer)
		return reconcile.Result{}, s.c.Update(ctx, u)
	}
	pools, _, _ := unstructured.NestedSlice(u.Object, "spec", "topology", "workers", "machinePools")
	for _, p := range pools {
		pm, _ := p.(map[string]any)
		if err := s.ensurePool(ctx, u, pm); err != nil {
			return reconcile.Result{}, err
		}
	}
	if kubeconfig != nil {
		if err := s.ensureSecret(ctx, u, kubeconfig); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := s.setClusterStatus(ctx, u, kubeconfig != nil, held); err != nil {
		return reconcile.Result{}, err
	}
	if held != "" || kubeconfig == nil {
		return reconcile.Result{RequeueAfter: requeue}, nil
	}
	return reconcile.Result{}, nil
}

// ensurePool makes the MachinePool of one topology pool and marks its
// replicas ready.
func (s *Simulator) ensurePool(ctx context.Context, cluster *unstructured.Unstructured, pool map[string]any) error {
	poolName, _ := pool["name"].(string)
	annotations, _, _ := unstructured.NestedStringMap(pool, "metadata", "annotations")
	replicas := int64(1)
	if r, ok := pool["replicas"].(int64); ok {
		replicas = r
	} else if m, ok := annotations[capz.AnnotationAutoscalerMin]; ok {
		if v, err := strconv.ParseInt(m, 10, 32); err == nil {
			replicas = v
		}
	}
	name := cluster.GetName() + "-" + poolName
	mp := newObject(capz.MachinePoolGVK)
	err := s.c.Get(ctx, client.ObjectKey{Namespace: cluster.GetNamespace(), Name: name}, mp)
	if apierrors.IsNotFound(err) {
		mp = newObject(capz.MachinePoolGVK)
		mp.SetNamespace(cluster.GetNamespace())
		mp.SetName(name)
		mp.SetLabels(map[string]string{
			capz.LabelClusterName:   cluster.GetName(),
			capz.LabelTopologyOwned: "",
			capz.LabelTopologyPool:  poolName,
		})
		mp.SetAnnotations(annotations)
		mp.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion: capz.APIVersion, Kind: "Cluster", Name: cluster.GetName(), UID: cluster.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}})
		version, _, _ := unstructured.NestedString(cluster.Object, "spec", "topology", "version")
		mp.Object["spec"] = map[string]any{
			"clusterName": cluster.GetName(),
			"replicas":    replicas,
			"template": map[string]any{"spec": map[string]any{
				"clusterName": cluster.GetName(),
				"version":     version,
				"bootstrap": map[string]any{"configRef": map[string]any{
					"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": name,
				}},
				"infrastructureRef": map[string]any{
					"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AzureManagedMachinePool", "name": name,
				},
			}},
		}
		if err := s.c.Create(ctx, mp); err != nil {
			return fmt.Errorf("create MachinePool %s: %w", name, err)
		}
	} else if err != nil {
		return err
	}
	want := map[string]any{
		"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas, "upToDateReplicas": replicas,
		"phase":          "Running",
		"initialization": map[string]any{"infrastructureProvisioned": true, "bootstrapDataSecretCreated": true},
	}
	if equality.Semantic.DeepEqual(mp.Object["status"], want) {
		return nil
	}
	mp.Object["status"] = want
	return s.c.Status().Update(ctx, mp)
}

func (s *Simulator) ensureSecret(ctx context.Context, cluster *unstructured.Unstructured, kubeconfig []byte) error {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cluster.GetNamespace(), Name: capz.KubeconfigSecretName(cluster.GetName())}
	err := s.c.Get(ctx, key, sec)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	sec = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{capz.LabelClusterName: cluster.GetName()}},
		Type:       "cluster.x-k8s.io/secret",
		Data:       map[string][]byte{capz.KubeconfigKey: kubeconfig},
	}
	return s.c.Create(ctx, sec)
}

// setClusterStatus writes the conditions, initialization and phase.
func (s *Simulator) setClusterStatus(ctx context.Context, u *unstructured.Unstructured, haveKubeconfig bool, held string) error {
	var conds []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &conds)
	}
	set := func(t string, ok bool, why string) {
		c := metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Simulated", ObservedGeneration: u.GetGeneration()}
		switch {
		case held == t:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, HeldReason, "held False by capztest.Simulator.HoldCondition"
		case !ok:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, "NoKubeconfig", why
		}
		meta.SetStatusCondition(&conds, c)
	}
	noKC := "capztest has no kubeconfig for this Cluster's name"
	set("InfrastructureReady", true, "")
	set("ControlPlaneInitialized", haveKubeconfig, noKC)
	set("ControlPlaneAvailable", haveKubeconfig, noKC)
	b, err := json.Marshal(conds)
	if err != nil {
		return err
	}
	var condList []any
	if err := json.Unmarshal(b, &condList); err != nil {
		return err
	}
	phase := "Provisioning"
	if haveKubeconfig {
		phase = "Provisioned"
	}
	want := map[string]any{
		"conditions":         condList,
		"initialization":     map[string]any{"infrastructureProvisioned": true, "controlPlaneInitialized": haveKubeconfig},
		"phase":              phase,
		"observedGeneration": u.GetGeneration(),
	}
	if equality.Semantic.DeepEqual(u.Object["status"], want) {
		return nil
	}
	u.Object["status"] = want
	return s.c.Status().Update(ctx, u)
}

// delete tears a Cluster down as CAPI would: MachinePools and kubeconfig
// Secret first, then the finalizer.
func (s *Simulator) delete(ctx context.Context, u *unstructured.Unstructured, hold bool) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(u, ClusterFinalizer) {
		return reconcile.Result{}, nil
	}
	if hold {
		return reconcile.Result{RequeueAfter: requeue}, nil
	}
	mps := newList(capz.MachinePoolGVK)
	if err := s.c.List(ctx, mps, client.InNamespace(u.GetNamespace()), client.MatchingLabels{capz.LabelClusterName: u.GetName()}); err != nil {
		return reconcile.Result{}, err
	}
	for i := range mps.Items {
		if err := s.c.Delete(ctx, &mps.Items[i]); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: capz.KubeconfigSecretName(u.GetName())}}
	if err := s.c.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	if len(mps.Items) > 0 {
		return reconcile.Result{RequeueAfter: requeue}, nil
	}
	controllerutil.RemoveFinalizer(u, ClusterFinalizer)
	return reconcile.Result{}, client.IgnoreNotFound(s.c.Update(ctx, u))
}
