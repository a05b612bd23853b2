package existing_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/install"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// kubeconfigFile writes c's admin kubeconfig to a file, as a user would have
// it, and attaches it under name.
func kubeconfigFile(t *testing.T, name string, c *topology.Cluster) existing.Cluster {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(path, c.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ec, err := existing.Kubeconfig(name, path, "")
	if err != nil {
		t.Fatal(err)
	}
	return ec
}

// judgeDispatch runs the dispatch scenario and every per-job assertion.
func judgeDispatch(t *testing.T, ctx context.Context, env *scenario.Env, prefix string, jobs int) {
	t.Helper()
	if err := env.Check.SetupActive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := scenario.Dispatch(ctx, env, scenario.DispatchOptions{Jobs: jobs, Kinds: []observe.Kind{observe.KindJob}, NamePrefix: prefix}); err != nil {
		t.Fatal(err)
	}
}

// A local topology started WITHOUT MultiKueue stands for clusters a user
// already has, with Kueue installed: they are attached by kubeconfig files in
// wire mode, MultiKueue is set up by the connector, the dispatch scenario and
// every assertion pass, and Close removes exactly what was created.
func TestWireAttachesClustersByKubeconfig(t *testing.T) {
	ctx := context.Background()
	// The clusters' Kueue gets what the connector of this run needs
	// ($MKTK_CONNECTOR), as an installation for that connector would.
	conn, err := connect.FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	mgr, workers := testtopo.Bare(ctx, t, topology.Options{Workers: 2, Connector: conn}, local.Options{})
	var mkcs kueue.MultiKueueClusterList
	if err := mgr.Client.List(ctx, &mkcs); err != nil || len(mkcs.Items) != 0 {
		t.Fatalf("the bare manager has MultiKueueClusters %v (err %v); want none", mkcs.Items, err)
	}
	o := existing.Options{Mode: existing.ModeWire, Manager: kubeconfigFile(t, "manager", mgr)}
	for _, w := range workers {
		o.Workers = append(o.Workers, kubeconfigFile(t, w.Name, w))
	}
	// The install step runs on every cluster before it is attached; Kueue
	// runs on these already (Helm's install needs a kubelet: see
	// topology/install's tests), so its Installer only records the plans
	// and checks that it reaches each cluster with what it was given.
	var mu sync.Mutex
	plans := map[string]install.Plan{}
	o.Install = &install.Step{Installer: func(ctx context.Context, c *topology.Cluster, plan install.Plan) error {
		cs, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			return err
		}
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		plans[c.Name+"/"+string(c.Role)] = plan
		return nil
	}}
	topo, err := existing.New(ctx, topology.Options{Progress: testlog.Writer(t), Connector: conn}, o)
	if err != nil {
		t.Fatal(err)
	}
	needs, err := conn.KueueNeeds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 3 || !reflect.DeepEqual(plans["manager/manager"].Kueue.Needs, needs) ||
		!reflect.DeepEqual(plans["worker-1/worker"].Kueue.Needs, topology.KueueNeeds{}) || plans["worker-2/worker"].Kueue.Spec.Kueue.Namespace != topo.Spec.Kueue.Namespace {
		t.Errorf("install plans %v; want the manager with the connector's needs %+v, each worker without", slices.Sorted(maps.Keys(plans)), needs)
	}
	if !strings.Contains(topo.Facts.Source, "ConfigMap kueue-system/"+topology.KueueConfigMapName) {
		t.Errorf("Facts.Source = %q; want the manager's Kueue ConfigMap", topo.Facts.Source)
	}
	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	judgeDispatch(t, ctx, env, "wired", 4)
	env.Close()

	if err := topo.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// What the topology created is gone; the clusters, Kueue and what was
	// there before are not.
	for _, w := range workers {
		err := mgr.Client.Get(ctx, client.ObjectKey{Name: w.Name}, &kueue.MultiKueueCluster{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("cluster %q: MultiKueueCluster %s after Close: %v; want NotFound", mgr.Name, w.Name, err)
		}
		err = w.Client.Get(ctx, client.ObjectKey{Name: "cluster-queue"}, &kueue.ClusterQueue{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("cluster %q: ClusterQueue cluster-queue after Close: %v; want NotFound", w.Name, err)
		}
	}
	if err := mgr.Client.Get(ctx, client.ObjectKey{Namespace: "kueue-system", Name: topology.KueueConfigMapName}, nilConfigMap()); err != nil {
		t.Errorf("cluster %q: Kueue's ConfigMap, which the topology did not create, is gone: %v", mgr.Name, err)
	}
}

// A fully wired local topology, with a non-default gcInterval and quotas
// that differ by worker, is attached in adopt mode with topology.Options
// left empty and the workers under other names: the workers are matched to
// their MultiKueueClusters by address, Kueue's configuration and the quotas
// are read from the clusters (not Options' defaults), and the verdicts are
// the same as on the original topology.
func TestAdoptReadsTheSetupFromTheClusters(t *testing.T) {
	ctx := context.Background()
	gc := 30 * time.Second
	orig, err := local.New(ctx, topology.Options{
		Workers: 2, WorkerQuota: topology.Quota{CPU: "3", Memory: "6Gi"},
		WorkerQuotas: map[string]topology.Quota{"worker-2": {CPU: "1", Memory: "2Gi"}},
		Kueue:        topology.KueueOptions{GCInterval: &gc},
	}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orig.CloseWith(t)

	// The user's names for the workers are not the MultiKueueCluster names;
	// given in the other order.
	o := existing.Options{Mode: existing.ModeAdopt, Manager: kubeconfigFile(t, "hub", orig.Manager),
		Workers: []existing.Cluster{kubeconfigFile(t, "west", orig.Workers[1]), kubeconfigFile(t, "east", orig.Workers[0])}}
	topo, err := existing.New(ctx, topology.Options{Progress: testlog.Writer(t)}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if got := []string{topo.Workers[0].Name, topo.Workers[1].Name}; got[0] != "worker-1" || got[1] != "worker-2" {
		t.Errorf("adopted workers %v; want [worker-1 worker-2] (matched by address, in MultiKueueConfig order)", got)
	}
	if topo.Spec.GCInterval() != gc || topo.Facts.GCInterval != gc {
		t.Errorf("gcInterval %s (facts %s); want %s read from the manager", topo.Spec.GCInterval(), topo.Facts.GCInterval, gc)
	}
	if q := topo.Spec.Queues; q.AdmissionCheck != "multikueue" || q.MultiKueueConfig != "multikueue" || q.ClusterQueue != "cluster-queue" || q.LocalQueue != "user-queue" {
		t.Errorf("adopted queues %+v; want the objects the local topology made", q)
	}
	// The clusters' quotas, not Options' default of 4 CPU and 8Gi.
	for name, want := range map[string][2]string{"hub": {"4", "8Gi"}, "worker-1": {"3", "6Gi"}, "worker-2": {"1", "2Gi"}} {
		q, ok := topo.Spec.Quotas[name]
		if cpu, mem := q[corev1.ResourceCPU], q[corev1.ResourceMemory]; !ok || cpu.String() != want[0] || mem.String() != want[1] {
			t.Errorf("Spec.Quotas[%q] = %v (present %t); want cpu %s, memory %s, read from its ClusterQueue", name, q, ok, want[0], want[1])
		}
	}

	adopted, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer adopted.Close()
	original, err := scenario.Observe(ctx, orig)
	if err != nil {
		t.Fatal(err)
	}
	defer original.Close()
	judgeDispatch(t, ctx, adopted, "adopted", 4)
	// The same verdicts on the original topology, for the same jobs.
	if err := original.Check.QuotaRespected(ctx); err != nil {
		t.Error(err)
	}
	if err := original.Check.NoOrphans(ctx); err != nil {
		t.Error(err)
	}
	// The quota judged is the one the worker has, observed.
	evs, _ := adopted.Obs.History(observe.KindClusterQueue, "", "cluster-queue")
	found := false
	for _, e := range evs {
		if e.Cluster == "worker-1" && e.Type == observe.QuotaSet {
			cpu := e.Usage["cpu"]
			found = cpu.String() == "3"
		}
	}
	if !found {
		t.Errorf("no QuotaSet cpu=3 observed for worker-1's ClusterQueue: %v", evs)
	}
}

// A Kueue value given in Options that the manager contradicts is an error
// naming both values.
func TestAdoptRejectsAContradictedOverride(t *testing.T) {
	ctx := context.Background()
	gc := 30 * time.Second
	orig, err := local.New(ctx, topology.Options{Workers: 1, Kueue: topology.KueueOptions{GCInterval: &gc}}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orig.CloseWith(t)
	wrong := time.Minute
	o := existing.Options{Mode: existing.ModeAdopt, Manager: kubeconfigFile(t, "manager", orig.Manager), Workers: []existing.Cluster{kubeconfigFile(t, "worker-1", orig.Workers[0])}}
	_, err = existing.New(ctx, topology.Options{Kueue: topology.KueueOptions{GCInterval: &wrong}}, o)
	if err == nil || !strings.Contains(err.Error(), "Options.Kueue.GCInterval: 1m0s given") || !strings.Contains(err.Error(), `cluster "manager" runs 30s`) {
		t.Fatalf("err = %v; want the given 1m0s and the cluster's 30s named", err)
	}
	// Adopting a manager whose MultiKueue is not set up says so.
	o.AdmissionCheck = "nope"
	_, err = existing.New(ctx, topology.Options{}, o)
	if err == nil || !strings.Contains(err.Error(), `AdoptOptions.AdmissionCheck: cluster "manager" has no MultiKueue AdmissionCheck "nope"`) {
		t.Fatalf("err = %v; want the missing AdmissionCheck named", err)
	}
}

func nilConfigMap() *corev1.ConfigMap { return &corev1.ConfigMap{} }

// Wiring with a connector whose needs the manager's Kueue does not have (the
// ClusterProfile gate and credentials provider) is an error saying what is
// missing, before anything is created.
func TestWireChecksTheConnectorsNeeds(t *testing.T) {
	ctx := context.Background()
	mgr, workers := testtopo.Bare(ctx, t, topology.Options{Workers: 1, Connector: connect.KubeconfigSecret{}}, local.Options{})
	o := existing.Options{Mode: existing.ModeWire, Manager: kubeconfigFile(t, "manager", mgr), Workers: []existing.Cluster{kubeconfigFile(t, workers[0].Name, workers[0])}}
	_, err := existing.New(ctx, topology.Options{Connector: connect.ClusterProfile{}}, o)
	if err == nil || !strings.Contains(err.Error(), "connector cluster-profile needs from the manager's Kueue feature gate MultiKueueClusterProfile=true") ||
		!strings.Contains(err.Error(), `credentialsProviders "secretreader"`) {
		t.Fatalf("err = %v; want the missing gate and credentials provider named", err)
	}
	var mkcs kueue.MultiKueueClusterList
	if err := mgr.Client.List(ctx, &mkcs); err != nil || len(mkcs.Items) != 0 {
		t.Errorf("MultiKueueClusters after the refusal: %d (err %v); want none created", len(mkcs.Items), err)
	}

	// An install step that fails on one cluster stops the attach, naming it.
	o.Install = &install.Step{Installer: func(_ context.Context, c *topology.Cluster, _ install.Plan) error {
		if c.Role == topology.RoleWorker {
			return errors.New("the chart refused")
		}
		return nil
	}}
	_, err = existing.New(ctx, topology.Options{Connector: connect.KubeconfigSecret{}}, o)
	if err == nil || !strings.Contains(err.Error(), `cluster "`+workers[0].Name+`": installing Kueue: the chart refused`) {
		t.Fatalf("err = %v; want the worker's failed install named", err)
	}
	if err := mgr.Client.List(ctx, &mkcs); err != nil || len(mkcs.Items) != 0 {
		t.Errorf("MultiKueueClusters after the failed install: %d (err %v); want none created", len(mkcs.Items), err)
	}
}
