package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// swappable connects workers with kubeconfig Secrets but gives the manager's
// Kueue what ClusterProfiles need (CRD, gate, secretreader provider), so that
// a worker can be switched from one to the other while the topology runs.
type swappable struct{ connect.KubeconfigSecret }

func (swappable) KueueNeeds(ctx context.Context) (topology.KueueNeeds, error) {
	return connect.ClusterProfile{}.KueueNeeds(ctx)
}

// TestConnectorSwapMidRun switches worker-1's MultiKueueCluster from its
// kubeconfig Secret to a ClusterProfile while Jobs run on it, submits more
// Jobs, then switches it back and submits more again. Each connector has its
// own worker ServiceAccount, so the worker's audit log says which
// credentials MultiKueue used: after each switch the new identity must write
// on worker-1, and once it did the old one may finish only what was in flight
// (a write for a Job submitted before the switch, within switchGrace of the
// new identity's first write: a reconcile that took its client before the
// switch) and must write nothing else. Throughout,
// the MultiKueueCluster ends Active (its Active transitions are logged),
// every Job is admitted exactly once and finished, and nothing is orphaned.
// worker-2 has room for one Job at a time so that most Jobs land on worker-1.
func TestConnectorSwapMidRun(t *testing.T) {
	ctx := context.Background()
	kubeconfigSA, profileSA := "multikueue-manager", "multikueue-profile"
	topo, env := testtopo.StartObserved(ctx, t, topology.Options{
		Workers:      2,
		WorkerQuotas: map[string]topology.Quota{"worker-2": {CPU: "1", Memory: "2Gi"}},
		Connector:    swappable{connect.KubeconfigSecret{ServiceAccount: kubeconfigSA, Guard: true}},
		Progress:     testlog.Writer(t),
	}, local.Options{})
	a := assert.Require(t, env.Check)
	a.SetupActive(ctx)

	w1 := topo.Workers[0]
	audit := topo.Provider().(topology.AuditProvider).AuditSource(w1.Name)
	if audit == nil {
		t.Fatalf("cluster %q has no audit log", w1.Name)
	}
	req := topology.ConnectRequest{Manager: topo.Manager, Worker: w1, KueueNamespace: topo.Spec.Kueue.Namespace, Integrations: topo.Spec.Kueue.Integrations}
	user := func(sa string) string { return "system:serviceaccount:" + req.KueueNamespace + ":" + sa }

	var jobs []*batchv1.Job
	submit := func(prefix string, runFor time.Duration) []*batchv1.Job {
		t.Helper()
		var out []*batchv1.Job
		for i := range 4 {
			j := workload.NewJob(fmt.Sprintf("%s-%d", prefix, i), "default").Queue("user-queue").Requests("1", "1Gi").RunFor(runFor).Obj()
			if err := topo.Manager.Client.Create(ctx, j); err != nil {
				t.Fatal(err)
			}
			out = append(out, j)
		}
		jobs = append(jobs, out...)
		return out
	}

	// Kubeconfig Secret: Jobs running on worker-1 when the switch comes.
	before := submit("before", 4*time.Second)
	waitRunningOn(ctx, t, env, before, w1.Name)

	src, err := connect.ClusterProfile{ServiceAccount: profileSA, Guard: true}.Connect(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	toProfile := time.Now()
	setSource(ctx, t, topo, w1.Name, src)
	profileJobs := submit("profile", 2*time.Second)
	waitRunningOn(ctx, t, env, profileJobs, w1.Name)
	switchedTo(ctx, t, audit, toProfile, user(profileSA), user(kubeconfigSA), before)

	// And back, again with Jobs in flight.
	src, err = connect.KubeconfigSecret{ServiceAccount: kubeconfigSA, Guard: true}.Connect(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	toSecret := time.Now()
	setSource(ctx, t, topo, w1.Name, src)
	after := submit("after", 2*time.Second)
	waitRunningOn(ctx, t, env, after, w1.Name)
	switchedTo(ctx, t, audit, toSecret, user(kubeconfigSA), user(profileSA), append(before, profileJobs...))

	c := assert.For(t, env.Check)
	for _, j := range jobs {
		c.ExactlyOnceAdmitted(ctx, j)
		c.Finished(ctx, j)
	}
	c.ClusterActive(ctx, w1.Name)
	c.NoOrphans(ctx)
	evs, _ := env.Obs.History(observe.KindMultiKueueCluster, "", w1.Name)
	var transitions []string
	for _, e := range evs {
		if e.Type == observe.ClusterActive || e.Type == observe.ClusterInactive {
			transitions = append(transitions, fmt.Sprintf("%s %s at %s", e.Type, e.Detail, e.Time.Format("15:04:05.000")))
		}
	}
	t.Logf("MultiKueueCluster %s Active transitions (switches at %s and %s): %s", w1.Name,
		toProfile.Format("15:04:05.000"), toSecret.Format("15:04:05.000"), strings.Join(transitions, "; "))
}

// setSource replaces a MultiKueueCluster's clusterSource.
func setSource(ctx context.Context, t *testing.T, topo *topology.Topology, name string, src kueue.ClusterSource) {
	t.Helper()
	mkc := &kueue.MultiKueueCluster{}
	if err := topo.Manager.Client.Get(ctx, client.ObjectKey{Name: name}, mkc); err != nil {
		t.Fatal(err)
	}
	mkc.Spec.ClusterSource = src
	if err := topo.Manager.Client.Update(ctx, mkc); err != nil {
		t.Fatalf("cluster %q: update MultiKueueCluster %s: %v", topo.Manager.Name, name, err)
	}
}

// waitRunningOn waits until one of jobs has its remote Job on cluster.
func waitRunningOn(ctx context.Context, t *testing.T, env *scenario.Env, jobs []*batchv1.Job, cluster string) {
	t.Helper()
	err := poll.Until(ctx, env.Check.Timeout, fmt.Sprintf("one of %d Jobs to have its remote Job on cluster %q", len(jobs), cluster), func(context.Context) error {
		for _, j := range jobs {
			if evs, _ := env.Obs.History(observe.KindJob, j.Namespace, j.Name); hasCreatedOn(evs, cluster) {
				return nil
			}
		}
		return errors.New("none yet")
	})
	if err != nil {
		t.Fatal(err)
	}
}

// switchGrace bounds how long after the new identity's first write the old
// one may still finish a write it had in flight.
const switchGrace = 5 * time.Second

// switchedTo checks the worker's audit log since the switch: MultiKueue wrote
// as user newUser, and after newUser's first write oldUser wrote only for a
// Job of inFlight (submitted before the switch) and only within switchGrace.
func switchedTo(ctx context.Context, t *testing.T, audit topology.AuditSource, since time.Time, newUser, oldUser string, inFlight []*batchv1.Job) {
	t.Helper()
	var first time.Time
	err := poll.Until(ctx, time.Minute, "a write by "+newUser, func(ctx context.Context) error {
		writes, err := audit.Writes(ctx, since)
		if err != nil {
			return err
		}
		for _, w := range writes {
			if w.User == newUser {
				first = w.Received
				return nil
			}
		}
		return errors.New("none yet")
	})
	if err != nil {
		t.Fatal(err)
	}
	writes, err := audit.Writes(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	var finished []string
	for _, w := range writes {
		n[w.User]++
		if w.User != oldUser {
			continue
		}
		obj := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
		late := w.Received.Sub(first)
		switch job := jobOf(w.Name, inFlight); {
		case job != "" && late <= switchGrace:
			finished = append(finished, fmt.Sprintf("%s %s %s (Job %s, %s after)", w.Verb, w.Resource, obj, job, late.Round(time.Millisecond)))
		case job != "":
			t.Errorf("%s still wrote %s after %s first wrote at %s (beyond the %s an in-flight write may take): %s %s %s",
				oldUser, late.Round(time.Millisecond), newUser, first.Format("15:04:05.000"), switchGrace, w.Verb, w.Resource, obj)
		default:
			t.Errorf("after %s first wrote at %s, %s wrote for a Job submitted after the switch (%s later): %s %s %s",
				newUser, first.Format("15:04:05.000"), oldUser, late.Round(time.Millisecond), w.Verb, w.Resource, obj)
		}
	}
	t.Logf("switch at %s: %s first wrote %s later; writes since by user: %v; in-flight writes %s finished: %v", since.Format("15:04:05.000"), newUser,
		first.Sub(since).Round(time.Millisecond), n, oldUser, finished)
}

// jobOf names the Job of jobs that a worker object belongs to: the Job
// itself, or its Workload (job-<name>-<hash>); "" for none.
func jobOf(object string, jobs []*batchv1.Job) string {
	for _, j := range jobs {
		if object == j.Name || strings.HasPrefix(object, "job-"+j.Name+"-") {
			return j.Name
		}
	}
	return ""
}
