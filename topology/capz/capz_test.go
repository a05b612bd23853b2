package capz_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/capz"
	"github.com/multikueue-testkit/testkit/topology/capz/capztest"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/install"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestMain installs a discarding controller-runtime logger, as local.New
// does (this test starts the local clusters with the provider itself).
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// progressLog sends progress lines to t.Log and keeps them.
type progressLog struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

func (p *progressLog) Write(b []byte) (int, error) {
	s := strings.TrimRight(string(b), "\n")
	p.t.Log(s)
	p.mu.Lock()
	p.lines = append(p.lines, s)
	p.mu.Unlock()
	return len(b), nil
}

func (p *progressLog) has(sub string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.lines, func(l string) bool { return strings.Contains(l, sub) })
}

// management is a local cluster with CAPI's CRDs, an AKS-like ClusterClass
// and the simulator, plus bare local clusters (Kueue running, MultiKueue
// not set up) that stand for the AKS clusters.
type management struct {
	mgmt     existing.Cluster
	client   client.Client
	sim      *capztest.Simulator
	stand    map[string]*topology.Cluster
	kueueOpt topology.KueueOptions
}

const classNamespace, className = "default", "aks-clusterclass"

func startManagement(t *testing.T) *management {
	t.Helper()
	ctx := context.Background()
	gc := 30 * time.Second
	kopts := topology.KueueOptions{GCInterval: &gc}
	mgr, workers := testtopo.Bare(ctx, t, topology.Options{Workers: 2, Connector: connect.KubeconfigSecret{}, Kueue: kopts}, local.Options{})
	// The local manager is also the CAPI management cluster.
	if err := capztest.InstallCRDs(ctx, mgr.Config); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Client.Create(ctx, capztest.AKSClusterClass(classNamespace, className)); err != nil {
		t.Fatal(err)
	}
	stand := map[string]*topology.Cluster{mgr.Name: mgr}
	kcs := map[string][]byte{mgr.Name: mgr.Kubeconfig}
	for _, w := range workers {
		stand[w.Name] = w
		kcs[w.Name] = w.Kubeconfig
	}
	sim, err := capztest.Start(ctx, mgr.Config, kcs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sim.Stop(); err != nil {
			t.Error(err)
		}
	})
	return &management{mgmt: existing.RESTConfig("management", mgr.Config), client: mgr.Client, sim: sim, stand: stand, kueueOpt: kopts}
}

func (m *management) options(mgrName string, workers ...string) capz.Options {
	o := capz.Options{
		Management:        m.mgmt,
		ClusterClass:      capz.ClassRef{Name: className},
		KubernetesVersion: "v1.35.4",
		Manager:           capz.ClusterSpec{Name: mgrName},
		Variables:         map[string]any{"location": "westeurope"},
		PollInterval:      200 * time.Millisecond,
		ReadyTimeout:      2 * time.Minute,
		DeleteTimeout:     time.Minute,
	}
	for _, w := range workers {
		o.Workers = append(o.Workers, capz.ClusterSpec{Name: w})
	}
	return o
}

// clustersLeft lists the named Clusters and MachinePools of those Clusters
// still on the management cluster.
func (m *management) clustersLeft(t *testing.T, names ...string) []string {
	t.Helper()
	var left []string
	for _, n := range names {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(capz.ClusterGVK)
		err := m.client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: n}, u)
		if err == nil {
			left = append(left, "Cluster "+n)
		} else if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		mps := &unstructured.UnstructuredList{}
		mps.SetGroupVersionKind(capz.MachinePoolGVK.GroupVersion().WithKind("MachinePoolList"))
		if err := m.client.List(context.Background(), mps, client.InNamespace("default"), client.MatchingLabels{capz.LabelClusterName: n}); err != nil {
			t.Fatal(err)
		}
		for _, mp := range mps.Items {
			left = append(left, "MachinePool "+mp.GetName())
		}
	}
	return left
}

// The whole path without Azure: a CAPI management cluster (CAPI v1.13.5's
// CRDs on a local API server) with a simulated CAPI/CAPZ controller; the
// Clusters are provisioned from an AKS-like ClusterClass with MachinePool
// workers, waited for, attached through their kubeconfig Secrets, Kueue's
// installation is rendered offline from the plan the provider hands the
// installer, MultiKueue is wired, the dispatch scenario and the assertions
// pass; the same Clusters are attached again by label selector in adopt
// mode; Close deletes the Clusters and waits for them. Then the failures:
// a Cluster that never gets ready, one whose deletion never finishes, a
// missing ClusterClass or pool class, a missing Cluster or Secret.
func TestCAPZOnASimulatedManagementCluster(t *testing.T) {
	m := startManagement(t)

	t.Run("provision, dispatch, attach by selector, close", func(t *testing.T) {
		ctx := context.Background()
		progress := &progressLog{t: t}
		var mu sync.Mutex
		renders := map[string]*install.KueueRender{}
		roles := map[string]topology.Role{}
		o := m.options("manager", "worker-1", "worker-2")
		o.Labels = map[string]string{"suite": "capz-test"}
		// worker-2 has a pool of its own, autoscaled from 2 to 4 nodes.
		o.Workers[1].MachinePools = []capz.MachinePool{
			{Name: "mp-0", Class: "default-system", Replicas: 1},
			{Name: "gpu", Class: "default-worker", MinSize: 2, MaxSize: 4},
		}
		o.Kueue.Installer = func(ctx context.Context, c *topology.Cluster, plan install.Plan) error {
			r, err := install.RenderKueue(ctx, plan.Kueue)
			mu.Lock()
			defer mu.Unlock()
			renders[c.Name], roles[c.Name] = r, c.Role
			return err
		}
		start := time.Now()
		topo, err := capz.New(ctx, topology.Options{Progress: progress, Kueue: m.kueueOpt}, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("provisioned and wired in %s", time.Since(start).Round(time.Millisecond))
		closed := false
		t.Cleanup(func() {
			if !closed {
				_ = topo.Close(context.Background())
			}
		})
		p := topo.Provider().(*capz.Provider)
		if got := slices.Sorted(slices.Values(p.Created())); !slices.Equal(got, []string{"manager", "worker-1", "worker-2"}) {
			t.Errorf("Created() = %v", got)
		}
		if topo.Manager.Name != "manager" || len(topo.Workers) != 2 || topo.Workers[0].Name != "worker-1" || topo.Workers[1].Name != "worker-2" {
			t.Fatalf("topology clusters %v", topo.Clusters())
		}
		// The attached clusters are the ones the kubeconfig Secrets point at.
		for _, c := range topo.Clusters() {
			if c.Config.Host != m.stand[c.Name].Config.Host {
				t.Errorf("cluster %q attached at %s; its Secret points at %s", c.Name, c.Config.Host, m.stand[c.Name].Config.Host)
			}
		}
		for _, line := range []string{"capz: Cluster default/worker-2: ", "gpu=2/2", "capz: 3 Clusters ready"} {
			if !progress.has(line) {
				t.Errorf("no progress line with %q", line)
			}
		}

		// The Clusters and the MachinePools CAPI made from their topology.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(capz.ClusterGVK)
		if err := m.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "worker-2"}, u); err != nil {
			t.Fatal(err)
		}
		if cls, _, _ := unstructured.NestedString(u.Object, "spec", "topology", "classRef", "name"); cls != className || u.GetLabels()[capz.LabelRole] != "worker" || u.GetLabels()[capz.LabelManager] != "manager" {
			t.Errorf("Cluster worker-2: classRef %q, labels %v", cls, u.GetLabels())
		}
		mp := &unstructured.Unstructured{}
		mp.SetGroupVersionKind(capz.MachinePoolGVK)
		if err := m.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "worker-2-gpu"}, mp); err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(mp.Object, "spec", "replicas"); r != 2 || mp.GetAnnotations()[capz.AnnotationAutoscalerMax] != "4" {
			t.Errorf("MachinePool worker-2-gpu: replicas %d, annotations %v; want 2 and max-size 4", r, mp.GetAnnotations())
		}

		// The Clusters as artifacts: the Cluster, then its MachinePools.
		dir := t.TempDir()
		if err := capz.WriteClusters(ctx, m.mgmt, "default", []string{"worker-2", "gone"}, dir); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "worker-2.yaml")); err != nil || !strings.Contains(string(b), "kind: Cluster\n") ||
			!strings.Contains(string(b), "name: worker-2-gpu") || !strings.Contains(string(b), "type: ControlPlaneAvailable") || strings.Contains(string(b), "managedFields") {
			t.Errorf("worker-2.yaml (err %v):\n%s", err, b)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "gone.yaml")); !strings.Contains(string(b), "# Cluster default/gone: not found") {
			t.Errorf("gone.yaml: %s", b)
		}

		// Kueue's installation as the provider planned it, rendered offline.
		if len(renders) != 3 || roles["manager"] != topology.RoleManager || roles["worker-1"] != topology.RoleWorker {
			t.Fatalf("installer called for %v (roles %v); want the manager and both workers", slices.Sorted(mapsKeys(renders)), roles)
		}
		for name, r := range renders {
			cfg := r.Config
			if cfg.Namespace == nil || *cfg.Namespace != topo.Spec.Kueue.Namespace {
				t.Errorf("cluster %q: rendered namespace %v; want %s", name, cfg.Namespace, topo.Spec.Kueue.Namespace)
			}
			if cfg.MultiKueue == nil || cfg.MultiKueue.GCInterval == nil || cfg.MultiKueue.GCInterval.Duration != topo.Spec.GCInterval() {
				t.Errorf("cluster %q: rendered multiKueue %+v; want gcInterval %s, as the clusters run", name, cfg.MultiKueue, topo.Spec.GCInterval())
			}
			if cfg.Integrations == nil || !slices.Contains(cfg.Integrations.Frameworks, topology.IntegrationBatchJob) {
				t.Errorf("cluster %q: rendered integrations %+v", name, cfg.Integrations)
			}
			if !strings.Contains(r.Manifest, install.KueueImage+":v0.19.2") {
				t.Errorf("cluster %q: the rendered manifest does not run %s:v0.19.2", name, install.KueueImage)
			}
		}
		if topo.Spec.GCInterval() != 30*time.Second {
			t.Errorf("topology gcInterval %s; want the 30s the clusters run", topo.Spec.GCInterval())
		}

		// MultiKueue works on the provisioned clusters.
		env, err := scenario.Observe(ctx, topo)
		if err != nil {
			t.Fatal(err)
		}
		judge(t, ctx, env, "capz", 4)
		env.Close()

		// The same Clusters, attached by label selector in adopt mode.
		if _, err := capz.Select(ctx, capz.AttachOptions{Management: m.mgmt, Manager: "manager", Workers: []string{"worker-9"}}); err == nil ||
			!strings.Contains(err.Error(), `has no Cluster default/worker-9 (it has [manager worker-1 worker-2])`) {
			t.Errorf("Select of a missing Cluster: err = %v", err)
		}
		adopted, err := capz.Attach(ctx,

			topology.Options{Progress: progress}, capz.AttachOptions{
				Management: m.mgmt, Manager: "manager", WorkerSelector: capz.LabelRole + "=worker,suite=capz-test",
			})

		if err != nil {
			t.Fatal(err)
		}
		if adopted.ConnectorName != "adopted" || len(adopted.Workers) != 2 || adopted.Workers[0].Name != "worker-1" || adopted.Workers[1].Name != "worker-2" {
			t.Errorf("adopted %s with workers %v", adopted.ConnectorName, adopted.Workers)
		}
		aenv, err := scenario.Observe(ctx, adopted)
		if err != nil {
			t.Fatal(err)
		}
		judge(t, ctx, aenv, "adopted", 2)
		aenv.Close()
		if err := adopted.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := topo.Manager.Client.Get(ctx, client.ObjectKey{Name: "worker-1"}, &kueue.MultiKueueCluster{}); err != nil {
			t.Errorf("adopt mode's Close removed MultiKueueCluster worker-1: %v", err)
		}

		// Close deletes the Clusters and waits until they are gone.
		closed = true
		start = time.Now()
		if err := topo.Close(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("Close took %s", time.Since(start).Round(time.Millisecond))
		if left := m.clustersLeft(t, "manager", "worker-1", "worker-2"); len(left) > 0 {
			t.Errorf("after Close: %v left", left)
		}
		if !progress.has("capz: Clusters [") || !progress.has("deleted in") {
			t.Errorf("no progress line saying the Clusters were deleted")
		}
	})

	t.Run("a Cluster never ready fails within the budget, naming it; Close names a Cluster left", func(t *testing.T) {
		ctx := context.Background()
		progress := &progressLog{t: t}
		m.sim.SetKubeconfig("stuck-mgr", m.stand["manager"].Kubeconfig)
		m.sim.SetKubeconfig("stuck-w", m.stand["worker-1"].Kubeconfig)
		m.sim.HoldCondition("stuck-w", "ControlPlaneAvailable")
		m.sim.HoldDeletion("stuck-mgr", true)
		t.Cleanup(func() {
			m.sim.HoldDeletion("stuck-mgr", false)
			err := poll.Until(context.Background(), time.Minute, "the stuck Clusters to be gone", func(context.Context) error {
				if left := m.clustersLeft(t, "stuck-mgr", "stuck-w"); len(left) > 0 {
					return fmt.Errorf("%v", left)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
		o := m.options("stuck-mgr", "stuck-w")
		o.ReadyTimeout, o.DeleteTimeout = 3*time.Second, 2*time.Second
		o.Kueue.Skip = true
		start := time.Now()
		_, err := capz.New(ctx, topology.Options{Progress: progress, Kueue: m.kueueOpt}, o)
		took := time.Since(start)
		t.Logf("failed after %s: %v", took.Round(time.Millisecond), err)
		if err == nil {
			t.Fatal("capz.New succeeded with a Cluster held not ready")
		}
		msg := err.Error()
		for _, want := range []string{
			"timed out after 3s waiting for Cluster default/stuck-w",
			"condition ControlPlaneAvailable is False (" + capztest.HeldReason,
			"1 Clusters not deleted within 2s: Cluster default/stuck-mgr (deleting since",
			"finalizers [" + capztest.ClusterFinalizer + "]",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("error does not contain %q", want)
			}
		}
		if strings.Contains(msg, "waiting for Cluster default/stuck-mgr") {
			t.Errorf("the ready Cluster stuck-mgr is blamed: %v", err)
		}
		if took > 30*time.Second {
			t.Errorf("took %s; want about the 3s + 2s budgets", took)
		}
		// The Cluster whose deletion was not held is gone.
		if left := m.clustersLeft(t, "stuck-w"); len(left) > 0 {
			t.Errorf("after the failed provision: %v left", left)
		}
	})

	t.Run("a missing ClusterClass, pool class, Cluster or Secret is named before anything is made", func(t *testing.T) {
		ctx := context.Background()
		o := m.options("cc-mgr", "cc-w")
		o.ClusterClass.Name = "nope"
		if _, err := capz.New(ctx, topology.Options{}, o); err == nil || !strings.Contains(err.Error(), `Options.ClusterClass: management cluster "management" has no ClusterClass default/nope`) {
			t.Errorf("missing ClusterClass: err = %v", err)
		}
		o = m.options("cc-mgr", "cc-w")
		o.Workers[0].MachinePools = []capz.MachinePool{{Name: "mp-0", Class: "gpu-pool", Replicas: 1}}
		if _, err := capz.New(ctx, topology.Options{}, o); err == nil || !strings.Contains(err.Error(), `Options.Workers[0].MachinePools[0].Class: "gpu-pool" is not a machinePool class of ClusterClass default/aks-clusterclass (it has [default-system default-worker])`) {
			t.Errorf("missing pool class: err = %v", err)
		}
		if left := m.clustersLeft(t, "cc-mgr", "cc-w"); len(left) > 0 {
			t.Errorf("Clusters made despite the error: %v", left)
		}
		// A Cluster without a kubeconfig Secret (the simulator has no
		// cluster for its name): Select names the Secret and the state.
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "lonely", "namespace": "default"},
			"spec":     map[string]any{"topology": map[string]any{"classRef": map[string]any{"name": className}, "version": "v1.35.4"}},
		}}
		u.SetGroupVersionKind(capz.ClusterGVK)
		if err := m.client.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = m.client.Delete(context.Background(), u)
		})
		_, err := capz.Select(ctx, capz.AttachOptions{Management: m.mgmt, Manager: "lonely", Workers: []string{"lonely"}})
		if err == nil || !strings.Contains(err.Error(), "Cluster default/lonely has no kubeconfig Secret default/lonely-kubeconfig yet (InfrastructureReady=") {
			t.Errorf("Cluster without Secret: err = %v", err)
		}
	})
}

// judge runs the dispatch scenario and the per-job assertions.
func judge(t *testing.T, ctx context.Context, env *scenario.Env, prefix string, jobs int) {
	t.Helper()
	if err := env.Check.SetupActive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := scenario.Dispatch(ctx, env, scenario.DispatchOptions{Jobs: jobs, Kinds: []observe.Kind{observe.KindJob}, NamePrefix: prefix}); err != nil {
		t.Fatal(err)
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
