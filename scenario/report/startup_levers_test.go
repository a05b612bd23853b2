package report_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/scenario/report"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// lever is one start-up setting of the local control plane, applied on
// top of the current defaults: kube-apiserver flags (local.Options
// APIServerArgs), or environment and flags given to kube-apiserver or etcd
// through wrapper scripts in a KUBEBUILDER_ASSETS directory of the
// benchmark's own (so that a lever needs no change to the provider to be
// measured).
type lever struct {
	name     string
	apiArgs  []string
	apiEnv   []string
	etcdArgs []string
	// v1beta1 serves Kueue's CRDs at v1beta1 too (local.Options
	// ServeKueueV1beta1, the default before the storage-version lever).
	v1beta1 bool
	// etcd is local.Options.Etcd.
	etcd local.EtcdMode
}

// startupLevers are the levers measured, "defaults" first.
func startupLevers() []lever {
	return []lever{
		{name: "defaults"},
		{name: "admission-plugins-off", apiArgs: []string{"--disable-admission-plugins=ServiceAccount,ResourceQuota,LimitRanger,PodSecurity," +
			"DefaultStorageClass,StorageObjectInUseProtection,PersistentVolumeClaimResize,RuntimeClass,CertificateApproval,CertificateSigning," +
			"ClusterTrustBundleAttest,CertificateSubjectRestriction,DefaultIngressClass,TaintNodesByCondition,DefaultTolerationSeconds," +
			"PodTopologyLabels,MutatingAdmissionPolicy"}},
		{name: "runtime-config-off", apiArgs: []string{"--runtime-config=autoscaling/v1=false,autoscaling/v2=false,policy/v1=false," +
			"certificates.k8s.io/v1=false,resource.k8s.io/v1=false,flowcontrol.apiserver.k8s.io/v1=false"}},
		{name: "watch-cache-off", apiArgs: []string{"--watch-cache=false"}},
		{name: "event-ttl-5m", apiArgs: []string{"--event-ttl=5m"}},
		{name: "apiserver-GOMEMLIMIT-256MiB", apiEnv: []string{"GOMEMLIMIT=256MiB"}},
		// From local.BigTopologyWorkers on, the limit is the default: this
		// lifts it.
		{name: "apiserver-GOMEMLIMIT-off", apiEnv: []string{"GOMEMLIMIT=off"}},
		{name: "apiserver-GOMEMLIMIT-192MiB", apiEnv: []string{"GOMEMLIMIT=192MiB"}},
		{name: "apiserver-GOMEMLIMIT-224MiB", apiEnv: []string{"GOMEMLIMIT=224MiB"}},
		{name: "apiserver-GOMEMLIMIT-160MiB", apiEnv: []string{"GOMEMLIMIT=160MiB"}},
		{name: "apiserver-GOGC-50", apiEnv: []string{"GOGC=50"}},
		// The default gives each kube-apiserver half of the CPUs
		// (controlplane.go); this measures all of them, the Go default.
		{name: "apiserver-GOMAXPROCS-all", apiEnv: []string{"GOMAXPROCS=" + strconv.Itoa(runtime.NumCPU())}},
		{name: "etcd-snapshot-count-1000", etcdArgs: []string{"--snapshot-count=1000"}},
		{name: "etcd-quota-256MiB", etcdArgs: []string{"--quota-backend-bytes=268435456"}},
		// The lever kept in crds.go, measured the other way round: how much
		// serving v1beta1 as well costs.
		{name: "kueue-v1beta1-served", v1beta1: true},
		// One etcd for all clusters, each API server under its own
		// --etcd-prefix; from local.BigTopologyWorkers on it is the
		// default, and etcd-per-cluster measures the other way round.
		{name: "etcd-shared", etcd: local.EtcdShared},
		{name: "etcd-per-cluster", etcd: local.EtcdPerCluster},
		// Idle work of an API server nobody uses: its identity Lease,
		// renewed every 10 s (beta gate, on by default; the mixed-version
		// proxy depends on it), and its metric polls of etcd (object counts
		// per resource every minute, the database size every 30 s).
		{name: "apiserver-identity-off", apiArgs: []string{"--feature-gates=APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false"}},
		{name: "etcd-metric-polls-off", apiArgs: []string{"--etcd-count-metric-poll-period=0", "--etcd-db-metric-poll-interval=0"}},
	}
}

// BenchmarkStartupLevers measures, in one run, each start-up lever alone
// against the defaults: the time for 1 manager + N workers to become Active
// (N: $MKTK_LEVERS_WORKERS, default 3), the CPU time its processes used
// (etcd, kube-apiserver, kube-controller-manager, Kueue and the operators:
// every child process) and their memory (PSS) once Active. Each of
// $MKTK_LEVERS_ROUNDS rounds (default 2) starts one topology per lever, the
// order rotating between rounds. It reports each lever's means and their
// ratios to the defaults. Run it once (-benchtime 1x: more would repeat the
// rounds), with the binaries cached:
//
//	go test ./scenario/report -run '^$' -bench StartupLevers -benchtime 1x -timeout 60m
//
// MKTK_LEVERS=name,name limits the run to those levers (and the defaults).
// MKTK_LEVERS_IDLE=60s also measures, in the first round, the CPU each
// lever's topology uses while idle over that window (its processes and
// this one), reported as <lever>-idle-cores.
func BenchmarkStartupLevers(b *testing.B) {
	ctx := context.Background()
	n := 3
	if v := os.Getenv("MKTK_LEVERS_WORKERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("MKTK_LEVERS_WORKERS=%q: %v", v, err)
		}
	}
	bins, err := assets.Ensure(ctx, assets.Options{NoBuild: true})
	if err != nil {
		b.Fatal(err)
	}
	levers := startupLevers()
	if only := os.Getenv("MKTK_LEVERS"); only != "" {
		var keep []lever
		for _, l := range levers {
			if l.name == "defaults" || strings.Contains(","+only+",", ","+l.name+",") {
				keep = append(keep, l)
			}
		}
		levers = keep
	}
	dirs := make([]string, len(levers))
	for i, l := range levers {
		if dirs[i], err = wrapperDir(b.TempDir(), bins, l); err != nil {
			b.Fatal(err)
		}
	}
	rounds := 2
	if v := os.Getenv("MKTK_LEVERS_ROUNDS"); v != "" {
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			b.Fatalf("MKTK_LEVERS_ROUNDS=%q: want a positive number", v)
		}
	}
	var idle time.Duration
	if v := os.Getenv("MKTK_LEVERS_IDLE"); v != "" {
		if idle, err = time.ParseDuration(v); err != nil {
			b.Fatalf("MKTK_LEVERS_IDLE=%q: %v", v, err)
		}
	}
	b.Setenv(assets.EnvAssets, "")
	type sums struct{ wall, cpu, mem, all float64 }
	got := make([]sums, len(levers))
	b.ResetTimer()
	for it := 0; it < rounds; it++ {
		for k := range levers {
			i := (k + it) % len(levers)
			l := levers[i]
			os.Setenv(assets.EnvAssets, dirs[i])
			start := time.Now()
			topo, err := local.New(ctx, topology.Options{Workers: n}, local.Options{APIServerArgs: l.apiArgs, ServeKueueV1beta1: l.v1beta1, Etcd: l.etcd})
			if err != nil {
				b.Fatalf("lever %s: %v", l.name, err)
			}
			wall := time.Since(start)
			mem := report.MemoryUnder(topo.Provider().(*local.Provider).Dir())
			all := report.TreeMemory() // with this process: the agents and the observer
			cpu := childCPU()
			if idle > 0 && it == 0 {
				c0, s0 := childCPU(), selfCPU()
				select { // a fixed measuring window, not a wait for state
				case <-time.After(idle):
				case <-ctx.Done():
				}
				c1, s1 := childCPU(), selfCPU()
				b.Logf("lever %s, idle 1+%d over %s: its processes %.3f cores, this process (agents, forwarders) %.3f cores", l.name, n, idle, (c1-c0)/idle.Seconds(), (s1-s0)/idle.Seconds())
				b.ReportMetric((c1-c0+s1-s0)/idle.Seconds(), l.name+"-idle-cores")
			}
			if err := topo.Close(ctx); err != nil {
				b.Fatalf("lever %s: teardown: %v", l.name, err)
			}
			b.Logf("round %d, lever %-28s Active in %6.2fs, processes' CPU %6.2fs, PSS %5d MiB (%5d MiB with this process)", it, l.name, wall.Seconds(), cpu, mem>>20, all>>20)
			got[i].wall += wall.Seconds()
			got[i].cpu += cpu
			got[i].mem += float64(mem) / (1 << 20)
			got[i].all += float64(all) / (1 << 20)
		}
	}
	N := float64(rounds)
	base := got[0]
	for i, l := range levers {
		g := got[i]
		b.ReportMetric(g.wall/N, l.name+"-s")
		b.ReportMetric(g.cpu/N, l.name+"-cpu-s")
		b.ReportMetric(g.mem/N, l.name+"-MiB")
		b.ReportMetric(g.all/N, l.name+"-with-test-process-MiB")
		if i > 0 {
			b.ReportMetric(g.wall/base.wall, l.name+"-s/defaults")
			b.ReportMetric(g.cpu/base.cpu, l.name+"-cpu/defaults")
			b.ReportMetric(g.mem/base.mem, l.name+"-MiB/defaults")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// selfCPU is this process's CPU time (user + system, seconds).
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// wrapperDir writes kube-apiserver and etcd wrappers that exec the real
// binaries with l's environment and etcd flags.
func wrapperDir(dir string, bins assets.Binaries, l lever) (string, error) {
	write := func(name, real string, env, args []string) error {
		script := fmt.Sprintf("#!/bin/sh\nexec env %s %q \"$@\" %s\n", strings.Join(env, " "), real, strings.Join(args, " "))
		return os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755)
	}
	if err := write("kube-apiserver", bins.APIServer, l.apiEnv, nil); err != nil {
		return "", err
	}
	return dir, write("etcd", bins.Etcd, nil, l.etcdArgs)
}

// childCPU is the CPU time (user + system, seconds) of this process's
// direct children: the clusters' etcd, kube-apiserver and
// kube-controller-manager.
func childCPU() float64 {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	total := 0.0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		total += (ut + st) / 100 // clock ticks; USER_HZ is 100 on Linux
	}
	return total
}
