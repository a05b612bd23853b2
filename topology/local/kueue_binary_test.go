package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestKueueBinaryDispatchesAJob runs the local topology with Kueue as its
// real binary (the default version unless MKTK_KUEUE_VERSION says another)
// and checks the canonical Job behaviour with the history-based assertions:
// the manager's Kueue and each worker's are separate processes, whose
// configuration is the one the version's chart gives.
func TestKueueBinaryDispatchesAJob(t *testing.T) {
	ctx := context.Background()
	version := os.Getenv(assets.EnvKueueVersion)
	if version == "" {
		version = local.DefaultKueueVersion
	}
	lp := local.NewProvider(local.Options{Kueue: local.KueueOptions{Version: version}})
	topo, err := topology.New(ctx, lp, topology.Options{Workers: 2, Progress: os.Stderr, Connector: connect.KubeconfigSecret{}})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close(ctx)

	// cmd/kueue logs its version first: the binary is the one asked for.
	kueueLogsSay(t, lp, topo, `"gitVersion":"`+version+`"`)
	if topo.Facts.Version != version {
		t.Errorf("Topology.Facts.Version = %q, want %s (read from the cluster: %s)", topo.Facts.Version, version, topo.Facts.Source)
	}
	// The chart installs no nomination-clearing policy by default, and the
	// local topology runs the chart's defaults: the fact says so, read
	// from an API server (v1.36) that serves the kind.
	if f := topo.Facts; !f.NominationPolicyRead || f.NominationPolicy != "" || !strings.Contains(f.NominationPolicyNote, "no MutatingAdmissionPolicy") {
		t.Errorf("nomination policy fact: read %t, policy %q, note %q; want read, none, and a note saying none is installed", f.NominationPolicyRead, f.NominationPolicy, f.NominationPolicyNote)
	}
	e, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a := assert.For(t, e.Check)
	a.SetupActive(ctx)
	q := topo.Spec.Queues
	job := workload.NewJob("bin", q.Namespaces[0]).Queue(q.LocalQueue).Requests("1", "1Gi").RunFor(time.Second).Obj()
	if err := topo.Manager.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	a.ExactlyOnceAdmitted(ctx, job)
	a.NominationCleared(ctx, job)
	a.Finished(ctx, job)
	a.StatusSynced(ctx, job)
	a.NoOrphans(ctx)
}

// TestJobSetBinaryWithKueueBinary runs JobSets through MultiKueue where
// Kueue and the JobSet controller both run as their binaries (JobSet at the
// version the Kueue binary's go.mod names), with JobSet's own webhooks: one
// that succeeds, one that fails.
func TestJobSetBinaryWithKueueBinary(t *testing.T) {
	ctx := context.Background()
	lp := local.NewProvider(local.Options{Kueue: local.KueueOptions{Version: local.DefaultKueueVersion}})
	topo, err := topology.New(ctx, lp, topology.Options{Workers: 2, Progress: os.Stderr, Connector: connect.KubeconfigSecret{},
		Kueue: topology.KueueOptions{Integrations: []string{topology.IntegrationBatchJob, topology.IntegrationJobSet}}})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close(ctx)
	for _, name := range topo.Spec.AllClusterNames() {
		if _, err := os.Stat(filepath.Join(lp.Dir(), name, "jobset.log")); err != nil {
			t.Errorf("cluster %q: no JobSet controller process log: %v", name, err)
		}
	}
	e, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	lq := topo.Spec.Queues.LocalQueue
	objs := []client.Object{
		workload.NewJobSet("js-ok", "default").Queue(lq).Replicas(2).Requests("100m", "64Mi").RunFor(time.Second).Obj(),
		workload.NewJobSet("js-fail", "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Fails().Obj(),
	}
	for _, o := range objs {
		if err := topo.Manager.Client.Create(ctx, o); err != nil {
			t.Fatalf("cluster %q: create JobSet %s: %v", topo.Manager.Name, o.GetName(), err)
		}
	}
	want := map[string]string{
		"js-ok":   "Succeeded restarts=0 terminalState=Completed",
		"js-fail": "Failed restarts=0 terminalState=Failed",
	}
	a := assert.For(t, e.Check)
	endAsWanted(ctx, t, topo.Manager, a, objs, want)
	a.NoOrphans(ctx)
}

// kueueLogsSay checks that every cluster's Kueue log holds each of wants.
func kueueLogsSay(t *testing.T, lp *local.Provider, topo *topology.Topology, wants ...string) {
	t.Helper()
	for _, name := range topo.Spec.AllClusterNames() {
		log, err := os.ReadFile(filepath.Join(lp.Dir(), name, "kueue.log"))
		if err != nil {
			t.Fatalf("cluster %q: %v", name, err)
		}
		for _, want := range wants {
			if !strings.Contains(string(log), want) {
				t.Errorf("cluster %q: kueue.log lacks %q: not the Kueue build asked for", name, want)
			}
		}
	}
}
