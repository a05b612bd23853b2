package local

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// replica is one Kueue process of an HA cluster: its name (also its host
// name, so its Lease holder identity is "<name>_<uuid>", as a pod's),
// the process, the forwarder it reaches its API server through
// (PartitionReplica cuts it) and the one in front of its visibility server
// (StopVisibility cuts it).
type replica struct {
	cluster string
	name    string // "kueue-0"
	bin     *kueueBinary
	api     *forwarder
	vis     *forwarder

	mu sync.Mutex
	// startedAt is when the current start began; identity the Lease holder
	// identity of the current start, once seen holding the Lease ("" before).
	startedAt time.Time
	identity  string
}

// currentIdentity is the Lease holder identity of the replica's current
// start, "" until it has been seen leading.
func (r *replica) currentIdentity() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.identity
}

// replicaName is the name of the i-th replica of a cluster's Kueue.
func replicaName(i int) string { return fmt.Sprintf("kueue-%d", i) }

// replicaOfHolder returns the replica name a Lease holder identity names
// ("kueue-1_0f3c…" → "kueue-1"); for a pod it is the pod name.
func replicaOfHolder(holder string) string {
	name, _, _ := strings.Cut(holder, "_")
	return name
}
