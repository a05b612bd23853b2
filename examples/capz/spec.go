// Package capzexample is the worked example for a CAPZ e2e author: given the
// bootstrap (management) cluster's ClusterProxy, it provisions AKS Clusters
// from a ClusterClass (or attaches the ones the spec made), installs Kueue,
// wires MultiKueue, runs the canonical scenarios with the testkit's
// assertions, and leaves artifacts under $ARTIFACTS. Copy RunMultiKueue into
// a spec; capz_test.go runs it against a management cluster named by
// environment variables (and is skipped without them).
package capzexample

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/capz"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/workload"
)

// ClusterProxy is the part of CAPI's framework.ClusterProxy used here; the
// bootstrapClusterProxy of a CAPZ spec is one.
type ClusterProxy interface {
	GetName() string
	GetRESTConfig() *rest.Config
	GetClient() client.Client
}

// TB is testing.T or Ginkgo's GinkgoT().
type TB interface {
	assert.FatalTB
	Helper()
}

// Input says which clusters to run on: Provision creates them, else Attach
// names them. Management is filled from the bootstrap proxy in both.
type Input struct {
	Provision *capz.Options
	Attach    *capz.AttachOptions
	// Jobs submitted at once in the burst scenario; default 10.
	Jobs int
	// Progress receives the provisioning and setup lines (GinkgoWriter,
	// os.Stderr); nil discards.
	Progress io.Writer
	// ArtifactFolder is where failures and the Clusters are written, as
	// CAPZ's e2e specs pass their artifactFolder flag; default $ARTIFACTS
	// (assert.ArtifactsFromEnv); empty writes nothing.
	ArtifactFolder string
}

// RunMultiKueue is what a CAPZ spec calls with its bootstrap proxy:
//
//  1. provision (capz.New: Clusters from the ClusterClass, waited for,
//     Kueue installed with Helm, MultiKueue wired) or attach (capz.Attach:
//     kubeconfig Secrets of the Clusters named or selected, adopt or wire);
//  2. the setup is Active; one Job is admitted on exactly one worker,
//     nominations are cleared, the losers' copies cleaned, the status
//     synced, the Workload finished; a burst of Jobs likewise; no
//     ClusterQueue over quota at any time; nothing left on the workers;
//  3. artifacts: failed assertions write a report, redacted dumps, Events
//     and the controller logs under <ArtifactFolder>/multikueue-testkit/
//     (the assertions do it), and the CAPI Clusters with their MachinePools
//     go to <ArtifactFolder>/multikueue-testkit/capz/ (capz.WriteClusters);
//  4. Close: provisioned Clusters are deleted and waited for (unless
//     KeepClusters); attached ones keep everything but what was wired.
func RunMultiKueue(ctx context.Context, t TB, bootstrap ClusterProxy, in Input) {
	artifacts := in.ArtifactFolder
	if artifacts == "" {
		artifacts = assert.ArtifactsFromEnv(os.Getenv)
	}
	t.Helper()
	mgmt := existing.Proxy(bootstrap)
	mgmt.Client = bootstrap.GetClient() // CAPI's scheme is enough: Secrets and unstructured Clusters
	opts := topology.Options{Progress: in.Progress}
	var topo *topology.Topology
	var err error
	namespace, names := "", []string(nil)
	if in.Provision != nil {
		o := *in.Provision
		o.Management = mgmt
		namespace = o.Namespace
		names = append(names, o.Manager.Name)
		for _, w := range o.Workers {
			names = append(names, w.Name)
		}
		topo, err = capz.New(ctx, opts, o)
	} else {
		if in.Attach == nil {
			t.Fatalf("Input: neither Provision nor Attach given")
		}
		a := *in.Attach
		a.Management = mgmt
		namespace = a.Namespace
		// capz.Attach is Select + existing.New; done in two steps here to
		// know the Clusters a selector chose.
		var eo existing.Options
		if eo, err = capz.Select(ctx, a); err == nil {
			for _, c := range append([]existing.Cluster{eo.Manager}, eo.Workers...) {
				names = append(names, c.Name)
			}
			topo, err = existing.New(ctx, opts, eo)
		} else {
			names = append(append(names, a.Manager), a.Workers...)
		}
	}
	if err != nil {
		writeClusters(t, artifacts, mgmt, namespace, names) // their conditions say why
		t.Fatalf("MultiKueue on CAPZ: %v", err)
	}
	defer func() {
		if err := topo.Close(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("teardown: %v", err)
		}
	}()
	// Runs before Close: the Clusters as they were at the end.
	defer writeClusters(t, artifacts, mgmt, namespace, names)

	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	defer env.Close()
	env.Check.Artifacts = artifacts
	a := assert.For(t, env.Check)
	assert.Require(t, env.Check).SetupActive(ctx)

	q := topo.Spec.Queues
	job := workload.NewJob("capz-sample", q.Namespaces[0]).Queue(q.LocalQueue).Requests("100m", "64Mi").RunFor(10 * time.Second).Obj()
	if err := topo.Manager.Client.Create(ctx, job); err != nil {
		t.Fatalf("cluster %q: create Job %s/%s: %v", topo.Manager.Name, job.Namespace, job.Name, err)
	}
	a.ExactlyOnceAdmitted(ctx, job)
	a.NominationCleared(ctx, job)
	a.LosersCleaned(ctx, job)
	a.StatusSynced(ctx, job)
	a.Finished(ctx, job)

	jobs := in.Jobs
	if jobs == 0 {
		jobs = 10
	}
	res, err := scenario.Dispatch(ctx, env, scenario.DispatchOptions{Jobs: jobs, Kinds: []observe.Kind{observe.KindJob}, NamePrefix: "capz-burst", CPU: "100m", Memory: "64Mi", RunFor: 10 * time.Second})
	if err != nil {
		t.Errorf("burst of %d Jobs: %v", jobs, err)
	}
	for _, j := range res.Jobs {
		a.LosersCleaned(ctx, j)
		a.StatusSynced(ctx, j)
	}
	a.QuotaRespected(ctx)
	a.NoOrphans(ctx)
}

// writeClusters saves the CAPI Clusters and MachinePools under dir.
func writeClusters(t TB, dir string, mgmt existing.Cluster, namespace string, names []string) {
	if dir == "" || len(names) == 0 {
		return
	}
	if namespace == "" {
		namespace = capz.DefaultNamespace
	}
	out := filepath.Join(dir, "multikueue-testkit", "capz")
	if err := capz.WriteClusters(context.Background(), mgmt, namespace, names, out); err != nil {
		t.Errorf("artifacts: %v", err)
	}
}
