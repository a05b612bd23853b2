package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Inotify instances a topology's processes hold at the least, counted on a
// 1 + 19 start (2026-12-02): 3 per kube-apiserver, 1 per
// kube-controller-manager, 3 to 4 per Kueue process (its certificate
// watchers), 1 per kube-scheduler.
const (
	inotifyPerAPIServer = 3
	inotifyPerKCM       = 1
	inotifyPerKueue     = 3
	inotifyPerScheduler = 1
)

// inotifyLimitFile is Linux's per-user limit on inotify instances.
const inotifyLimitFile = "/proc/sys/fs/inotify/max_user_instances"

// inotifyNeeded is the fewest inotify instances a topology of workers
// workers holds, with kueuePerCluster Kueue processes per cluster
// (replicas in HA) and a kube-scheduler per worker when it has Nodes.
func inotifyNeeded(workers, kueueProcs int, schedulers bool) int {
	clusters := workers + 1
	n := clusters*(inotifyPerAPIServer+inotifyPerKCM) + kueueProcs*inotifyPerKueue
	if schedulers {
		n += workers * inotifyPerScheduler
	}
	return n
}

// checkInotify says, before anything starts, when the processes a topology
// needs would run out of the user's inotify instances: Kueue then exits at
// start ("couldn't initialize inotify: too many open files") and the start
// times out waiting for its webhook server. It counts the instances this
// user's processes hold now; when the limit or the count cannot be read it
// says nothing (the start then fails, if it does, with Kueue's own error).
func checkInotify(need int) error {
	raw, err := os.ReadFile(inotifyLimitFile)
	if err != nil {
		return nil
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil
	}
	held, ok := inotifyHeld()
	if !ok {
		return nil
	}
	return inotifyVerdict(need, held, limit)
}

// inotifyVerdict is checkInotify's judgement.
func inotifyVerdict(need, held, limit int) error {
	if held+need <= limit {
		return nil
	}
	return fmt.Errorf("local: the topology's processes need at least %d inotify instances and this user's processes hold %d of the %d Linux allows (fs.inotify.max_user_instances); raise the limit (sysctl -w fs.inotify.max_user_instances=1024, as .ci/run does) or start fewer workers",
		need, held, limit)
}

// inotifyHeld counts the inotify instances open in this user's processes.
func inotifyHeld() (int, bool) {
	fds, err := filepath.Glob("/proc/[0-9]*/fd")
	if err != nil {
		return 0, false
	}
	uid := uint32(os.Getuid())
	n := 0
	for _, dir := range fds {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Dir(dir), &st); err != nil || st.Uid != uid {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && target == "anon_inode:inotify" {
				n++
			}
		}
	}
	return n, true
}
