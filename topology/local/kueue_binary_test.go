package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

	for _, name := range topo.Spec.AllClusterNames() {
		log, err := os.ReadFile(filepath.Join(lp.Dir(), name, "kueue.log"))
		if err != nil {
			t.Fatalf("cluster %q: %v", name, err)
		}
		// cmd/kueue logs its version first: the binary is the one asked for.
		if !strings.Contains(string(log), `"gitVersion":"`+version+`"`) {
			t.Errorf("cluster %q: kueue.log does not say gitVersion %s", name, version)
		}
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
