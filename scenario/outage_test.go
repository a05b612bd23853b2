package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
)

// TestWorkerOutage stops the API server of the worker running the most Jobs
// (a real process stop) on 1 manager + 3 workers with a 20 s
// workerLostTimeout: the MultiKueueCluster goes Inactive, the lost worker's
// Jobs are held until workerLostTimeout after their placement and then
// re-dispatched to the other workers; the worker comes back Active; every
// Job finished, statuses synced, quota respected, nothing left behind.
//
// Kueue v0.17.0 does not pass the scenario as is, and this test says how
// (knownOutageFindings): when it evicts a Workload whose worker was lost, it
// dispatches the Workload again while the eviction is still under way (the
// quota still reserved on the manager): copies are created, admitted and
// deleted again on the other workers, and a remote Job can be created,
// suspended, on a worker that was never selected (ExactlyOnceAdmitted), then
// deleted. Those copies are also judged as the next or the previous cycle's
// losers (LosersCleaned). Every other failure fails the test, and so does a
// remote Job that started on a worker other than the one selected at the
// time (ranOutsideItsCycle), except for a Job stuck after such a dispatch
// (stuckAfterEviction), whose copy on the unselected worker can run.
func TestWorkerOutage(t *testing.T) {
	ctx := context.Background()
	env := resilient.get(t)
	start := time.Now()
	res, err := scenario.WorkerOutage(ctx, env, scenario.OutageOptions{})
	t.Logf("%d Jobs in %s; stopped %s at %s (Inactive %s later), restarted at %s (Active %s later)", len(res.Objects), time.Since(start).Round(time.Millisecond),
		res.Worker, res.Stopped.Format("15:04:05.000"), res.Inactive.Sub(res.Stopped).Round(time.Millisecond),
		res.Restarted.Format("15:04:05.000"), res.Active.Sub(res.Restarted).Round(time.Millisecond))
	judgeLostWorker(t, env, res, err, nil)
}

// judgeLostWorker fails t on every failure of a lost-worker scenario
// (WorkerOutage, Disconnect) but the known findings of the Kueue under
// test, which it logs (see TestWorkerOutage). more, when set, tells another
// known finding of one Job (its story, "" if none): every failure about
// that Job is then logged as that finding.
func judgeLostWorker(t *testing.T, env *scenario.Env, res scenario.OutageResult, err error, more func(client.Object) string) {
	t.Helper()
	for _, d := range res.InFlight {
		t.Logf("  %s: placed on %s at %s, held %s after the loss (%s after placement), then placed on %s",
			d.Job, res.Worker, d.Placed.Format("15:04:05.000"), d.Held(res.Stopped).Round(time.Millisecond),
			d.Released.Sub(d.Placed).Round(time.Millisecond), d.Next)
	}
	if len(res.InFlight) == 0 {
		t.Error("no Job was in flight on the lost worker")
	}
	known := knownOutageFindings(res.Worker)
	errs := leaves(err)
	var dispatchedInEviction []string // problems of the known findings
	for _, e := range errs {
		if f, ok := known(e); ok {
			dispatchedInEviction = append(dispatchedInEviction, f.Problems...)
		}
	}
	stuck := stuckAfterEviction(errs, dispatchedInEviction)
	staleWon := map[string]bool{}
	for _, o := range res.Objects {
		p := staleCopyWon(env, o, res.Worker)
		if p == "" && more != nil {
			p = more(o)
		}
		if p != "" {
			j := o.GetNamespace() + "/" + o.GetName()
			staleWon[j] = true
			t.Logf("Kueue %s finding (known): %s", env.Topo.Facts.Version, p)
		}
	}
	wonJobs := slices.Sorted(maps.Keys(staleWon))
	for _, e := range errs {
		if job := mentionsJob(e, wonJobs); job != "" {
			t.Logf("Kueue %s finding (known, the lost worker's copy won or blocked the finish): %s: %v", env.Topo.Facts.Version, job, e)
			continue
		}
		if f, ok := known(e); ok {
			t.Logf("Kueue %s finding (known): %s for %s: %v", env.Topo.Facts.Version, f.Assertion, f.Object, f.Problems)
			continue
		}
		if job := mentionsJob(e, stuck); job != "" {
			t.Logf("Kueue %s finding (known, kubernetes-sigs/kueue#11378): %s, dispatched while its eviction was under way, was never admitted again: %v", env.Topo.Facts.Version, job, e)
			continue
		}
		t.Error(e)
	}
	for _, o := range res.Objects {
		if staleWon[o.GetNamespace()+"/"+o.GetName()] {
			continue
		}
		if p := ranOutsideItsCycle(env, o); p != "" {
			if slices.Contains(stuck, o.GetNamespace()+"/"+o.GetName()) {
				// The copy made during the eviction can be admitted on
				// its worker and its Job run there: the same bug.
				t.Logf("Kueue %s finding (known, kubernetes-sigs/kueue#11378): %s", env.Topo.Facts.Version, p)
				continue
			}
			t.Error(p)
		}
	}
}

// leaves flattens joined and wrapped errors down to the assertions' failures
// and the scenario's own errors.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	var f *assert.Failure
	if errors.As(err, &f) && err == error(f) {
		return []error{f}
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		var out []error
		for _, e := range u.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// knownOutageFindings returns what tells an assertion failure every problem
// of which is one of the known effects of Kueue v0.17.0's dispatch around
// the eviction of a Workload whose worker (lost) was lost (see
// TestWorkerOutage):
//
//   - ExactlyOnceAdmitted: another worker's copy reserved quota or was
//     admitted while the manager still had the lost worker selected (the new
//     copies are made as soon as the admission check goes Retry, before
//     clusterName is reset); a remote Job created, suspended, on a worker
//     while none was selected (during the eviction);
//   - LosersCleaned: those copies judged as the previous cycle's kept losers
//     or, deleted when the manager released its quota, as the next cycle's
//     losers deleted early;
//   - QuotaRespected: a copy the worker's API server received after the
//     manager's API server completed the write that released the evicted
//     Workload's reservation and before the one that made it again, by the
//     audit logs (Kueue v0.19.2, two local runs in four; by receive times
//     alone two CI runs in five had shown it): MultiKueue nominates and
//     dispatches from its view of the evicted Workload, still reserved, and
//     its creates land in the tens of milliseconds the reservation is
//     released. The same problem judged by the Observer's receive times
//     alone is not taken as known.
func knownOutageFindings(lost string) func(error) (*assert.Failure, bool) {
	q := regexp.QuoteMeta(lost)
	patterns := map[string]*regexp.Regexp{
		"ExactlyOnceAdmitted": regexp.MustCompile(`^cluster "[^"]+": (remote Job \S+ created at \S+ while no worker was selected|cycle \d+: its copy of Workload \S+ got (QuotaReserved|Admitted) at \S+, after the manager had selected "` + q + `" at \S+)$`),
		"QuotaRespected":      regexp.MustCompile(`^cluster "[^"]+": Workload \S+ was dispatched at \S+ while it held no quota on the manager \(by the audit logs: the worker's API server received the create \S+ after the manager's API server completed the write that released the reservation, \S+ before the write that made it again\)$`),
		"LosersCleaned":       regexp.MustCompile(`^cluster "[^"]+": cycle \d+: its copy (was deleted at \S+, before the winner's copy on "[^"]+" was Admitted at \S+ \(MultiKueueWaitForWorkloadAdmitted=true\)|of Workload \S+ was kept after "` + q + `" was selected at \S+)$`),
	}
	return func(e error) (*assert.Failure, bool) {
		f, ok := e.(*assert.Failure)
		if !ok || len(f.Problems) == 0 || patterns[f.Assertion] == nil {
			return nil, false
		}
		for _, p := range f.Problems {
			if !patterns[f.Assertion].MatchString(p) {
				return nil, false
			}
		}
		return f, true
	}
}

// stuckAfterEviction returns the Jobs the scenario found not placed again
// after they left the lost worker, of those for which ExactlyOnceAdmitted
// saw a remote Job created while no worker was selected (MultiKueue
// dispatched during the eviction). Kueue v0.17.0 can leave such a workload
// unadmitted for good: kubernetes-sigs/kueue#11062 (from a stale cache the
// reconciler creates the new worker's copy without nominating it, and the
// webhook then refuses every attempt to set clusterName to it), fixed by
// #11378 ("workloads evicted from a worker cluster could fail to be
// re-admitted"; Kueue now waits for the eviction to complete before a new
// nomination), merged after v0.17.0 and cherry-picked to release-0.17
// (#11472). Seen in both fresh-clone CI runs of 2026-11-30 (1 of 6 Jobs);
// in the second the unselected worker admitted its copy and ran the Job.
func stuckAfterEviction(errs []error, dispatchedInEviction []string) []string {
	notPlaced := regexp.MustCompile(`^scenario (?:WorkerOutage|Disconnect): Job (\S+) was not placed on another worker after leaving `)
	var out []string
	for _, e := range errs {
		m := notPlaced.FindStringSubmatch(e.Error())
		if m == nil {
			continue
		}
		for _, p := range dispatchedInEviction {
			if strings.Contains(p, "remote Job "+m[1]+" created at ") && strings.HasSuffix(p, " while no worker was selected") {
				out = append(out, m[1])
				break
			}
		}
	}
	return out
}

// mentionsJob returns the Job of jobs that e is about: an assertion failure
// on it (or on its Workload, job-<name>-<hash>), or a scenario error naming
// it; "" if none.
func mentionsJob(e error, jobs []string) string {
	msg := e.Error()
	var f *assert.Failure
	isFailure := errors.As(e, &f)
	for _, j := range jobs {
		ns, name, _ := strings.Cut(j, "/")
		wlPrefix := "Workload " + ns + "/job-" + name + "-"
		switch {
		case isFailure && (f.Object == "Job "+j || strings.HasPrefix(f.Object, wlPrefix)):
			return j
		case !isFailure && regexp.MustCompile(`(^|\s)(Job |of Job )`+regexp.QuoteMeta(j)+`(\s|$|:)`).MatchString(msg):
			return j
		}
	}
	return ""
}

// staleCopyWon returns, for o, the story when MultiKueue, once the lost
// worker was back, deleted the remote Job on the worker the manager had
// selected (its status.clusterName, still set) while the lost worker's copy
// from the earlier cycle ran on. Seen with Kueue v0.19.2 (one run of two):
// reconcileGroup converges on bestMatchByCondition(Admitted), the remote
// admitted earliest, which is the lost worker's old copy, not the one
// status.clusterName names, and removes every other remote; clusterName is
// immutable, so the manager cannot follow the copy it kept. "" otherwise.
func staleCopyWon(env *scenario.Env, o client.Object, lost string) string {
	mgr := env.Topo.Manager.Name
	mwl, err := observe.WorkloadOf(context.Background(), env.Obs.Reader(env.Topo.Manager.Name), o.GetNamespace(), o.GetUID())
	if err != nil {
		return ""
	}
	wl, _ := env.Obs.History(observe.KindWorkload, mwl.Namespace, mwl.Name)
	jobs, _ := env.Obs.History(observe.KindJob, o.GetNamespace(), o.GetName())
	selected, at := "", time.Time{}
	for _, e := range wl {
		if e.Cluster == mgr && e.Type == observe.ClusterNameSet {
			selected, at = e.ClusterName(), e.Time
		}
	}
	if selected == "" || selected == lost {
		return ""
	}
	var deleted time.Time
	for _, e := range jobs {
		if e.Cluster == selected && e.Type == observe.Deleted && e.Time.After(at) {
			deleted = e.Time
		}
	}
	if deleted.IsZero() {
		return ""
	}
	var lostCopy time.Time
	for _, e := range jobs {
		switch {
		case e.Cluster == lost && e.Type == observe.Created && e.Time.Before(at):
			lostCopy = e.Time
		case e.Cluster == lost && e.Type == observe.Deleted && !lostCopy.IsZero() && e.Time.Before(deleted):
			lostCopy = time.Time{}
		}
	}
	if lostCopy.IsZero() {
		return ""
	}
	return fmt.Sprintf("Job %s/%s: MultiKueue deleted its running remote Job on %q, the worker the manager had selected at %s, at %s, and kept the copy on the lost worker %q (created %s); the manager's clusterName still names %q",
		o.GetNamespace(), o.GetName(), selected, at.Format("15:04:05.000"), deleted.Format("15:04:05.000"), lost, lostCopy.Format("15:04:05.000"), selected)
}

// ranOutsideItsCycle returns a problem when a remote copy of o's job started
// on a worker that was not the one the manager had selected at the time (a
// start before the first selection counts against the first).
func ranOutsideItsCycle(env *scenario.Env, o client.Object) string {
	mgr := env.Topo.Manager.Name
	mwl, err := observe.WorkloadOf(context.Background(), env.Obs.Reader(env.Topo.Manager.Name), o.GetNamespace(), o.GetUID())
	if err != nil {
		return "the manager has no Workload for " + o.GetNamespace() + "/" + o.GetName()
	}
	wl, _ := env.Obs.History(observe.KindWorkload, mwl.Namespace, mwl.Name)
	jobs, _ := env.Obs.History(observe.KindJob, o.GetNamespace(), o.GetName())
	for _, j := range jobs {
		if j.Cluster == mgr || j.Type != observe.JobStarted || j.UID == o.GetUID() {
			continue
		}
		selected, next := "", ""
		for _, e := range wl {
			if e.Cluster != mgr || e.Type != observe.ClusterNameSet {
				continue
			}
			v := e.ClusterName()
			if !e.Time.After(j.Time.Add(assert.DefaultSkew)) {
				selected = v
			} else if next == "" && v != "" {
				next = v
			}
		}
		if selected == "" {
			selected = next // MultiKueue creates the remote job just before it records the selection
		}
		if j.Cluster != selected {
			return "cluster \"" + j.Cluster + "\": the remote Job " + o.GetNamespace() + "/" + o.GetName() + " started at " +
				j.Time.Format("15:04:05.000") + " while the manager had selected \"" + selected + "\""
		}
	}
	return ""
}

// TestKnownOutageFindings: the messages seen in TestWorkerOutage's runs are
// recognised, and nothing else is.
func TestKnownOutageFindings(t *testing.T) {
	known := knownOutageFindings("worker-1")
	for _, tc := range []struct {
		assertion, problem string
		want               bool
	}{
		{"ExactlyOnceAdmitted", `cluster "worker-3": remote Job default/outage-job-0 created at +25.105s while no worker was selected`, true},
		{"ExactlyOnceAdmitted", `cluster "worker-2": cycle 1: its copy of Workload default/job-outage-job-5-fdce2 got QuotaReserved at +20.951s, after the manager had selected "worker-1" at +1.504s`, true},
		{"ExactlyOnceAdmitted", `cluster "worker-2": cycle 2: its copy of Workload default/job-outage-job-5-fdce2 got Admitted at +30.951s, after the manager had selected "worker-3" at +25.504s`, false},
		{"ExactlyOnceAdmitted", `cluster "worker-2": remote Job default/outage-job-0 created at +25.105s while the workload was placed on "worker-3"`, false},
		{"LosersCleaned", `cluster "worker-3": cycle 2: its copy was deleted at +26.264s, before the winner's copy on "worker-2" was Admitted at +26.63s (MultiKueueWaitForWorkloadAdmitted=true)`, true},
		{"LosersCleaned", `cluster "worker-2": cycle 1: its copy of Workload default/job-outage-job-4-b14dd was kept after "worker-1" was selected at +2.406s`, true},
		{"LosersCleaned", `cluster "worker-2": cycle 2: its copy of Workload default/job-outage-job-4-b14dd was kept after "worker-3" was selected at +22.406s`, false},
		{"StatusSynced", `cluster "manager": Job default/outage-job-0 never became Succeeded; the remote Job on "worker-2" did at +38s`, false},
		{"QuotaRespected", `cluster "worker-3": Workload default/job-outage-job-3-9908f was dispatched at +25.593s while it held no quota on the manager (by the audit logs: the worker's API server received the create 229ms after the manager's API server completed the write that released the reservation, 26ms before the write that made it again)`, true},
		{"QuotaRespected", `cluster "worker-3": Workload default/job-outage-job-3-9908f was dispatched at +25.593s while it held no quota on the manager (by the Observer's receive times: no audit log to order them by)`, false},
		{"QuotaRespected", `cluster "worker-3": Workload default/job-outage-job-3-9908f was dispatched at +25.593s while it held no quota on the manager (by the audit logs: the worker's API server received the create and no reservation was made after it)`, false},
		{"QuotaRespected", `cluster "worker-1": ClusterQueue cluster-queue admitted 10 cpu at +2.845s, over its quota of 4, held by default/forced`, false},
	} {
		_, got := known(&assert.Failure{Assertion: tc.assertion, Problems: []string{tc.problem}})
		if got != tc.want {
			t.Errorf("%s %q: known %t, want %t", tc.assertion, tc.problem, got, tc.want)
		}
	}
	if _, ok := known(errors.New("scenario WorkerOutage: something else")); ok {
		t.Error("a scenario error was taken for a known finding")
	}
}

// TestStuckAfterEviction: a Job not placed again is the known finding only
// when it was dispatched while no worker was selected, and then every error
// about it (and only about it) is recognised. The messages are CI's.
func TestStuckAfterEviction(t *testing.T) {
	notPlaced := errors.New(`scenario WorkerOutage: Job default/outage-job-2 was not placed on another worker after leaving "worker-1" (next: "")`)
	errs := []error{
		errors.New(`timed out after 2m50s waiting for cluster "manager": Workload default/job-outage-job-2-c3608 of Job default/outage-job-2 to be placed on a worker other than "worker-1"; last seen: placed on "worker-1" at 12:31:51.235, released at 12:32:11.051, not placed again`),
		notPlaced,
		&assert.Failure{Assertion: "StatusSynced", Object: "Job default/outage-job-2", Problems: []string{"x"}},
		errors.New(`scenario WorkerOutage: cluster "manager": Job default/outage-job-2 ended with no final state, built to end Succeeded`),
	}
	precursor := []string{`cluster "worker-2": remote Job default/outage-job-2 created at +21.752s while no worker was selected`}
	if got := stuckAfterEviction(errs, nil); len(got) != 0 {
		t.Fatalf("stuck without the precursor: %v", got)
	}
	if got := stuckAfterEviction(errs, []string{`cluster "worker-2": remote Job default/outage-job-20 created at +21.752s while no worker was selected`}); len(got) != 0 {
		t.Fatalf("another Job's precursor counted: %v", got)
	}
	stuck := stuckAfterEviction(errs, precursor)
	if len(stuck) != 1 || stuck[0] != "default/outage-job-2" {
		t.Fatalf("stuck %v", stuck)
	}
	for _, e := range errs {
		if mentionsJob(e, stuck) == "" {
			t.Errorf("not recognised: %v", e)
		}
	}
	for _, e := range []error{
		errors.New(`scenario WorkerOutage: cluster "manager": Job default/outage-job-20 ended with no final state, built to end Succeeded`),
		&assert.Failure{Assertion: "StatusSynced", Object: "Job default/outage-job-3", Problems: []string{"x"}},
		&assert.Failure{Assertion: "ExactlyOnceAdmitted", Object: "Workload default/job-outage-job-20-abcde", Problems: []string{"x"}},
		&assert.Failure{Assertion: "NoOrphans", Object: "", Problems: []string{`Job default/outage-job-2 left on "worker-2"`}},
	} {
		if j := mentionsJob(e, stuck); j != "" {
			t.Errorf("taken for the stuck Job %s: %v", j, e)
		}
	}
}
