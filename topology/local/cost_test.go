package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// procUsage is a process's resident memory and CPU time so far.
type procUsage struct {
	rssKiB int64
	cpu    time.Duration
}

// usageOf reads /proc/<pid>/status (VmRSS) and /proc/<pid>/stat (utime +
// stime, in clock ticks of 10 ms on Linux).
func usageOf(pid string) (procUsage, error) {
	var u procUsage
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			u.rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return u, err
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	u.cpu = time.Duration(ut+st) * 10 * time.Millisecond
	return u, nil
}

// children maps "<cluster>/<binary>" to the pid of each process of the
// topology in dir.
func children(dir string) map[string]string {
	out := map[string]string{}
	for _, pid := range local.ProcessesUnder(dir) {
		raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		bin := filepath.Base(args[0])
		for _, a := range args {
			if i := strings.Index(a, dir+"/"); i >= 0 {
				rest := a[i+len(dir)+1:]
				out[strings.SplitN(rest, "/", 2)[0]+"/"+bin] = strconv.Itoa(pid)
				break
			}
		}
	}
	return out
}

// costConfigs are the topologies TestMeasureComponentCosts measures.
var costConfigs = []struct {
	name         string
	integrations []string
}{
	{"batch/job", []string{topology.IntegrationBatchJob}},
	{"batch/job + JobSet", []string{topology.IntegrationBatchJob, topology.IntegrationJobSet}},
	{"batch/job + RayJob + RayCluster", []string{topology.IntegrationBatchJob, topology.IntegrationRayJob, topology.IntegrationRayCluster}},
	{"batch/job + PyTorchJob", []string{topology.IntegrationBatchJob, topology.IntegrationPyTorchJob}},
	{"batch/job + MPIJob", []string{topology.IntegrationBatchJob, topology.IntegrationMPIJob}},
	{"batch/job + AppWrapper", []string{topology.IntegrationBatchJob, topology.IntegrationAppWrapper}},
	// The LeaderWorkerSet controller on both clusters and kube-controller-manager's
	// StatefulSet controller; the jobs are batch Jobs (a LeaderWorkerSet
	// never finishes).
	{"batch/job + LeaderWorkerSet", []string{topology.IntegrationBatchJob, topology.IntegrationLeaderWorkerSet}},
	// The Kubeflow Trainer on the worker, beside the JobSet controller its
	// TrainJobs run as.
	{"batch/job + TrainJob + JobSet", []string{topology.IntegrationBatchJob, topology.IntegrationTrainJob, topology.IntegrationJobSet}},
}

const costConfigEnv = "MKTK_MEASURE_CONFIG"

// TestMeasureComponentCosts is not a check: with MKTK_MEASURE_COSTS=1 it
// logs what each component costs per cluster, for the README. Each
// configuration runs in a fresh test process (so that one's memory does not
// count for the next): resident memory and CPU over 30 s idle of every child
// process and of the test process (Kueue and the in-process controllers of
// both clusters), then one job alone and 10 at once (1 s runs) from
// creation to the manager's Finished, with the CPU they took.
func TestMeasureComponentCosts(t *testing.T) {
	if os.Getenv("MKTK_MEASURE_COSTS") != "1" {
		t.Skip("set MKTK_MEASURE_COSTS=1 to measure")
	}
	if i := os.Getenv(costConfigEnv); i != "" {
		n, _ := strconv.Atoi(i)
		measureCosts(t, n)
		return
	}
	for i := range costConfigs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMeasureComponentCosts$", "-test.v", "-test.timeout=20m")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", costConfigEnv, i))
		out, err := cmd.CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			if _, msg, ok := strings.Cut(line, "cost_test.go:"); ok {
				_, msg, _ = strings.Cut(msg, ": ")
				t.Log(msg)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", costConfigs[i].name, err, out)
		}
	}
}

func measureCosts(t *testing.T, i int) {
	ctx := context.Background()
	const idle = 30 * time.Second
	self := strconv.Itoa(os.Getpid())
	tc := costConfigs[i]
	runtime.GC()
	before, _ := usageOf(self)
	began := time.Now()
	topo, err := local.New(ctx, topology.Options{Workers: 1, Kueue: topology.KueueOptions{Integrations: tc.integrations}}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("[%s] 1 + 1 started (local.New returned, binaries cached) in %s", tc.name, time.Since(began).Round(time.Millisecond))
	dir := topo.Provider().(*local.Provider).Dir()
	procs := children(dir)
	time.Sleep(5 * time.Second) // settle after start-up; then measure an idle window
	runtime.GC()
	start := map[string]procUsage{}
	for name, pid := range procs {
		start[name], _ = usageOf(pid)
	}
	selfStart, _ := usageOf(self)
	time.Sleep(idle) // measuring idle CPU: nothing to wait for
	selfEnd, _ := usageOf(self)
	names := make([]string, 0, len(procs))
	for n := range procs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		end, _ := usageOf(procs[n])
		t.Logf("[%s] %-32s RSS %4d MiB, CPU %5.1f%% over %s idle", tc.name, n, end.rssKiB/1024, 100*float64(end.cpu-start[n].cpu)/float64(idle), idle)
	}
	t.Logf("[%s] test process (Kueue and the in-process controllers of 2 clusters): RSS %d MiB (%d MiB before the topology), CPU %.1f%% over %s idle",
		tc.name, selfEnd.rssKiB/1024, before.rssKiB/1024, 100*float64(selfEnd.cpu-selfStart.cpu)/float64(idle), idle)

	// Per job: one alone, then 10 at once; 1 s runs.
	const n = 10
	lq := topo.Spec.Queues.LocalQueue
	var objs []client.Object
	for j := range n + 1 {
		name := fmt.Sprintf("cost-%d", j)
		switch {
		case len(tc.integrations) > 1 && tc.integrations[1] == topology.IntegrationTrainJob:
			objs = append(objs, workload.NewTrainJob(name, "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj())
		case len(tc.integrations) > 1 && tc.integrations[1] == topology.IntegrationPyTorchJob:
			objs = append(objs, workload.NewPyTorchJob(name, "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj())
		case len(tc.integrations) > 1 && tc.integrations[1] == topology.IntegrationAppWrapper:
			objs = append(objs, workload.NewAppWrapper(name, "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj())
		case len(tc.integrations) > 1 && tc.integrations[1] == topology.IntegrationMPIJob:
			objs = append(objs, workload.NewMPIJob(name, "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj())
		case len(tc.integrations) > 1 && tc.integrations[1] == topology.IntegrationLeaderWorkerSet:
			objs = append(objs, workload.NewJob(name, "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj())
		case len(tc.integrations) > 1 && tc.integrations[1] == topology.IntegrationJobSet:
			objs = append(objs, workload.NewJobSet(name, "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj())
		case len(tc.integrations) > 1:
			objs = append(objs, workload.NewRayJob(name, "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj())
		default:
			objs = append(objs, workload.NewJob(name, "default").Queue(lq).Requests("100m", "64Mi").RunFor(time.Second).Obj())
		}
	}
	single := objs[n]
	objs = objs[:n]
	if slices.Contains(tc.integrations, topology.IntegrationTrainJob) {
		for _, c := range append([]*topology.Cluster{topo.Manager}, topo.Workers...) {
			if err := c.Client.Create(ctx, workload.NewClusterTrainingRuntime(workload.DefaultTrainingRuntime)); err != nil {
				t.Fatalf("cluster %q: %v", c.Name, err)
			}
		}
	}
	t1 := time.Now()
	if err := topo.Manager.Client.Create(ctx, single); err != nil {
		t.Fatal(err)
	}
	finalState(ctx, t, topo.Manager, single)
	t.Logf("[%s] one %T alone, 1 s run: Finished on the manager %s after creation", tc.name, single, time.Since(t1).Round(time.Millisecond))
	cpu0, _ := usageOf(self)
	kcm0 := map[string]procUsage{}
	for name, pid := range procs {
		kcm0[name], _ = usageOf(pid)
	}
	t0 := time.Now()
	for _, o := range objs {
		if err := topo.Manager.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		finalState(ctx, t, topo.Manager, o)
	}
	wall := time.Since(t0)
	cpu1, _ := usageOf(self)
	var childCPU time.Duration
	var kcmCPU time.Duration
	for name, pid := range procs {
		u, _ := usageOf(pid)
		childCPU += u.cpu - kcm0[name].cpu
		if strings.HasSuffix(name, "kube-controller-manager") {
			kcmCPU += u.cpu - kcm0[name].cpu
		}
	}
	t.Logf("[%s] %d %T at once, 1 s runs: all Finished on the manager after %s; per job: test process CPU %s, child processes CPU %s (kube-controller-manager %s)",
		tc.name, n, objs[0], wall.Round(time.Millisecond), ((cpu1.cpu - cpu0.cpu) / n).Round(time.Millisecond), (childCPU / n).Round(time.Millisecond), (kcmCPU / n).Round(time.Millisecond))
	if err := topo.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
