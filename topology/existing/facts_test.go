package existing_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// Kueue's own integration harness runs Kueue in-process: its clusters have no
// ConfigMap or Deployment that says how Kueue is configured. Played here by a
// local topology (garbage collection off, JobSet on) whose published
// ConfigMap is deleted, with a stray remote Workload on the worker that
// NoOrphans must name.
//
// Adopted with nothing given, every fact that could not be read is marked
// unknown in Facts.Assumed, the integrations are assumed from the CRDs the
// manager serves (JobSet's is there), and NoOrphans' failure says which
// origin it assumed. Adopted with the Configuration handed over
// (existing.Options.KueueConfiguration), its values are used, nothing is
// marked, and NoOrphans judges with the harness's gcInterval.
func TestAdoptWithoutAReadableConfiguration(t *testing.T) {
	ctx := context.Background()
	gc := time.Duration(0)
	integrations := []string{topology.IntegrationBatchJob, topology.IntegrationJobSet}
	orig, err := local.New(ctx, topology.Options{Workers: 1, Kueue: topology.KueueOptions{GCInterval: &gc, Integrations: integrations}}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orig.CloseWith(t)
	mgr, w := orig.Manager, orig.Workers[0]
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: orig.Spec.Kueue.Namespace, Name: topology.KueueConfigMapName}}
	if err := mgr.Client.Delete(ctx, cm); err != nil {
		t.Fatalf("cluster %q: delete ConfigMap %s/%s: %v", mgr.Name, cm.Namespace, cm.Name, err)
	}
	stray := workload.NewWorkload("harness-stray", "default").Queue("user-queue").Requests("1", "1Gi").Label(observe.LabelOrigin, orig.Spec.Kueue.Origin).Obj()
	if err := w.Client.Create(ctx, stray); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Client.Delete(ctx, stray) }()
	clusters := existing.Options{Mode: existing.ModeAdopt, Manager: kubeconfigFile(t, "manager", mgr), Workers: []existing.Cluster{kubeconfigFile(t, "worker-1", w)}}

	t.Run("nothing given", func(t *testing.T) {
		// gcInterval is given (a harness knows it), the rest is not.
		topo, err := existing.New(ctx, topology.Options{Kueue: topology.KueueOptions{GCInterval: &gc}, Progress: testlog.Writer(t)}, clusters)
		if err != nil {
			t.Fatal(err)
		}
		defer closeTopo(t, topo)
		f := topo.Facts
		for _, fact := range []string{topology.FactNamespace, topology.FactOrigin, topology.FactDispatcher, topology.FactWorkerLostTimeout, topology.FactIntegrations, topology.FactFeatureGates} {
			if _, ok := f.Assumed[fact]; !ok {
				t.Errorf("Facts.Assumed has no %s; want it marked unknown (Assumed %v)", fact, f.Assumed)
			}
		}
		if _, ok := f.Assumed[topology.FactGCInterval]; ok {
			t.Errorf("Facts.Assumed marks gcInterval, which was given: %v", f.Assumed[topology.FactGCInterval])
		}
		if got := topo.Spec.Kueue.Integrations; !slices.Contains(got, topology.IntegrationJobSet) {
			t.Errorf("Spec.Kueue.Integrations = %v; want jobset among them, assumed from the manager's CRDs", got)
		}
		if got := f.Say(topology.FactOrigin, "x"); !strings.Contains(got, "unknown: Kueue's default assumed") {
			t.Errorf("Facts.Say(origin) = %q; want it marked unknown", got)
		}
		env, err := scenario.Observe(ctx, topo)
		if err != nil {
			t.Fatal(err)
		}
		defer env.Close()
		mustFailWith(t, env.Check.NoOrphans(ctx), "Workload default/harness-stray", "gcInterval 0s;",
			"MultiKueue's origin multikueue (unknown: Kueue's default assumed; Kueue's configuration is not readable on cluster \"manager\"")
	})

	t.Run("Configuration handed over", func(t *testing.T) {
		cfg := orig.Spec.KueueConfiguration(topology.KueueNeeds{})
		o := clusters
		o.KueueConfiguration = &cfg
		topo, err := existing.New(ctx, topology.Options{Progress: testlog.Writer(t)}, o)
		if err != nil {
			t.Fatal(err)
		}
		defer closeTopo(t, topo)
		f := topo.Facts
		if len(f.Assumed) != 0 || !strings.Contains(f.Source, "existing.Options.KueueConfiguration") {
			t.Errorf("Facts from %q, assumed %v; want the Configuration handed over and nothing assumed", f.Source, f.Assumed)
		}
		if topo.Spec.GCInterval() != 0 || !slices.Equal(topo.Spec.Kueue.Integrations, integrations) {
			t.Errorf("gcInterval %s, integrations %v; want the Configuration's 0s and %v", topo.Spec.GCInterval(), topo.Spec.Kueue.Integrations, integrations)
		}
		env, err := scenario.Observe(ctx, topo)
		if err != nil {
			t.Fatal(err)
		}
		defer env.Close()
		start := time.Now()
		err = env.Check.NoOrphans(ctx)
		mustFailWith(t, err, "Workload default/harness-stray", "gcInterval 0s;")
		if err != nil && strings.Contains(err.Error(), "unknown") {
			t.Errorf("NoOrphans says a fact is unknown although the Configuration was handed over:\n%v", err)
		}
		// gcInterval 0: only the settle window, not 2 × Kueue's default 1m.
		if took := time.Since(start); took > assertGraceCeiling {
			t.Errorf("NoOrphans took %s; want about %s, its settle window (gcInterval 0 from the Configuration)", took.Round(time.Second), assert.NoOrphansSettle)
		}
	})
}

// assertGraceCeiling bounds NoOrphans' wait with garbage collection off (its
// settle window, 15 s) with room for a slow machine.
const assertGraceCeiling = 45 * time.Second

func closeTopo(t *testing.T, topo *topology.Topology) {
	t.Helper()
	if err := topo.Close(context.Background()); err != nil {
		t.Error(err)
	}
}

// mustFailWith fails t unless err is a failure whose text holds every want.
func mustFailWith(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no failure; want one saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("failure does not say %q:\n%v", w, err)
		}
	}
}
