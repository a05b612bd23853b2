// Package capzexample is the worked example for a CAPZ e2e author: given the
// bootstrap (management) cluster's ClusterProxy, it provisions AKS Clusters
// from a ClusterClass (or attaches the ones the spec made), installs Kueue,
// wires MultiKueue, runs the canonical scenarios with the testkit's
// assertions, and leaves artifacts under $ARTIFACTS. Copy RunMultiKueue into
// a spec; capz_test.go runs it against a management cluster named by
// environment variables (and is skipped without them).
package capzexample

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
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
	// Connector wires MultiKueue: connect.KubeconfigSecret or
	// connect.ClusterProfile (whose plugin a provisioned manager gets with
	// capz.KueueInstall.Kueue.CredentialsPlugin); nil is the library's
	// default (connect.Default).
	Connector topology.Connector
	// Intervals bound every wait, in the shape CAPZ's
	// e2eConfig.GetIntervals(specName, key) returns: {timeout, polling},
	// such as {"20m", "10s"}. The timeout becomes topology.Options.Timeouts
	// (how long an assertion waits while nothing changes, and how long a
	// kind's first copy may take to start); the polling interval is not
	// used, since the assertions watch. Default: the provider's suggestion
	// (minutes on AKS).
	Intervals []interface{}
	// Jobs submitted at once in the burst, of each kind; default 10.
	Jobs int
	// StressJobs is the stress run's load (more than the quota admits at
	// once, as the scenario requires); default 30.
	StressJobs int
	// SkipDisconnect leaves out the lost-worker scenario (a worker cut off
	// through its connection with Jobs in flight, then restored).
	SkipDisconnect bool
	// Progress receives the provisioning and setup lines (GinkgoWriter,
	// os.Stderr); nil discards.
	Progress io.Writer
	// ArtifactFolder is where failures and the Clusters are written, as
	// CAPZ's e2e specs pass their artifactFolder flag; default $ARTIFACTS
	// (assert.ArtifactsFromEnv); empty writes nothing.
	ArtifactFolder string
}

// Timeouts turns CAPZ's intervals ({timeout, polling}: strings such as
// "20m" or time.Durations) into the topology's timeouts; an error names the
// element.
func Timeouts(intervals []interface{}) (topology.Timeouts, error) {
	if len(intervals) == 0 {
		return topology.Timeouts{}, nil
	}
	var d time.Duration
	switch v := intervals[0].(type) {
	case string:
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return topology.Timeouts{}, fmt.Errorf("Input.Intervals[0]: %q: %v", v, err)
		}
	case time.Duration:
		d = v
	default:
		return topology.Timeouts{}, fmt.Errorf("Input.Intervals[0]: %v (%T): want a duration such as \"20m\"", v, v)
	}
	if d <= 0 {
		return topology.Timeouts{}, fmt.Errorf("Input.Intervals[0]: %s is not a positive timeout", d)
	}
	return topology.Timeouts{Progress: d, Start: d}, nil
}

// RunMultiKueue is what a CAPZ spec calls with its bootstrap proxy:
//
//  1. provision (capz.New: Clusters from the ClusterClass, waited for,
//     Kueue installed with Helm, MultiKueue wired) or attach (capz.Attach:
//     kubeconfig Secrets of the Clusters named or selected, adopt or wire),
//     with Input.Connector;
//  2. the canonical behaviours, for batch/Job and, when Kueue's
//     integrations enable it, JobSet: (1) the setup Active, every worker
//     connected; (2) one Job admitted on exactly one worker, (3) its
//     nominations cleared, (4) the losers' copies cleaned, (5) its status
//     synced and its Workload finished; (6) for each kind a job built to
//     succeed and one built to fail, each ending on the manager as its
//     remote copy did; (7) a burst of every kind at once, each judged as
//     above, no ClusterQueue over quota at any time, nothing left on the
//     workers;
//  3. a stress run (more jobs than the quota admits at once, every
//     per-workload assertion over each) and, unless SkipDisconnect, a
//     worker cut off through its connection with Jobs in flight: held
//     until workerLostTimeout, re-dispatched, the worker Active again
//     once restored (scenario.Disconnect; needs workerLostTimeout ≤ 5 min:
//     a provisioned Kueue gets 1 min, attached ones run what they run);
//  4. artifacts: failed assertions write a report, redacted dumps, Events
//     and the controller logs under <ArtifactFolder>/multikueue-testkit/
//     (the assertions do it), and the CAPI Clusters with their MachinePools
//     go to <ArtifactFolder>/multikueue-testkit/capz/ (capz.WriteClusters);
//  5. Close: provisioned Clusters are deleted and waited for (unless
//     KeepClusters); attached ones keep everything but what was wired.
func RunMultiKueue(ctx context.Context, t TB, bootstrap ClusterProxy, in Input) {
	artifacts := in.ArtifactFolder
	if artifacts == "" {
		artifacts = assert.ArtifactsFromEnv(os.Getenv)
	}
	t.Helper()
	timeouts, err := Timeouts(in.Intervals)
	if err != nil {
		t.Fatalf("%v", err)
	}
	mgmt := existing.Proxy(bootstrap)
	mgmt.Client = bootstrap.GetClient() // CAPI's scheme is enough: Secrets and unstructured Clusters
	opts := topology.Options{Progress: in.Progress, Connector: in.Connector, Timeouts: timeouts}
	var topo *topology.Topology
	namespace, names := "", []string(nil)
	if in.Provision != nil {
		o := *in.Provision
		o.Management = mgmt
		if !in.SkipDisconnect && opts.Kueue.WorkerLostTimeout == nil {
			// Kueue's default (15 min) is over what Disconnect waits out.
			opts.Kueue.WorkerLostTimeout = ptr.To(time.Minute)
		}
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
	run := scenario.For(t, env)
	assert.Require(t, env.Check).SetupActive(ctx)
	run.Setup(ctx)

	q := topo.Spec.Queues
	size := topo.JobSize()
	job := workload.NewJob("capz-sample", q.Namespaces[0]).Queue(q.LocalQueue).Requests(size.CPU, size.Memory).RunFor(10 * time.Second).Obj()
	if err := topo.Manager.Client.Create(ctx, job); err != nil {
		t.Fatalf("cluster %q: create Job %s/%s: %v", topo.Manager.Name, job.Namespace, job.Name, err)
	}
	a.ExactlyOnceAdmitted(ctx, job)
	a.NominationCleared(ctx, job)
	a.LosersCleaned(ctx, job)
	a.StatusSynced(ctx, job)
	a.Finished(ctx, job)

	kinds := []observe.Kind{observe.KindJob}
	if slices.Contains(scenario.Kinds(env), observe.KindJobSet) {
		kinds = append(kinds, observe.KindJobSet)
	}
	say := func(step string, n int, ok bool, start time.Time) {
		if in.Progress != nil {
			verdict := map[bool]string{true: "passed", false: "FAILED"}[ok]
			fmt.Fprintf(in.Progress, "capz example: %s: %d jobs, %s in %s\n", step, n, verdict, time.Since(start).Round(time.Second))
		}
	}
	start := time.Now()
	st, ok := run.StatusSync(ctx, scenario.StatusSyncOptions{Dispatch: scenario.DispatchOptions{Kinds: kinds, NamePrefix: "capz-status"}})
	say(fmt.Sprintf("StatusSync of %v, each built to succeed and to fail", kinds), len(st.Objects), ok, start)
	start = time.Now()
	burst, ok := run.Dispatch(ctx, scenario.DispatchOptions{Jobs: cmp.Or(in.Jobs, 10), Kinds: kinds, NamePrefix: "capz-burst", RunFor: 10 * time.Second})
	say(fmt.Sprintf("burst of %v at once", kinds), len(burst.Objects), ok, start)
	start = time.Now()
	stress, ok := run.Stress(ctx, scenario.StressOptions{Dispatch: scenario.DispatchOptions{Jobs: cmp.Or(in.StressJobs, 30), NamePrefix: "capz-stress"}})
	say("Stress", len(stress.Objects), ok, start)
	if !in.SkipDisconnect {
		start = time.Now()
		dis, ok := run.Disconnect(ctx, scenario.DisconnectOptions{Dispatch: scenario.DispatchOptions{NamePrefix: "capz-disconnect"}})
		say("Disconnect of "+dis.Worker, len(dis.Objects), ok, start)
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
