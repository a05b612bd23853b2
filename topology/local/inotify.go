package local

import (
	"os"

	"github.com/multikueue-testkit/testkit/internal/inotify"
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
// times out waiting for its webhook server.
func checkInotify(need int) error {
	return inotify.Check("local: the topology's processes", need, uint32(os.Getuid()))
}
