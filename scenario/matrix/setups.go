package matrix

import (
	"time"

	"github.com/multikueue-testkit/testkit/topology"
)

// Setup is a topology the behaviours of one setup share, started fresh for
// each target.
type Setup struct {
	Name string
	// Options are the topology's (Workers and the Kueue configuration);
	// the Start function adds what it provides (the Kueue to run).
	Options topology.Options
	// HA runs the manager's Kueue as replicas with leader election.
	HA  bool
	Doc string
}

// The setups' names.
const (
	SetupAllAtOnce   = "allatonce"
	SetupIncremental = "incremental"
	SetupExternal    = "external"
	SetupResilient   = "resilient"
	SetupHA          = "ha"
)

// ExternalDispatcher is the dispatcher name the external setup gives the
// manager's Kueue: one it does not implement, so the scenario nominates.
const ExternalDispatcher = "example.com/mktk-nominator"

// Setups are the topologies of the canonical behaviours for a topology of
// workers workers with integrations enabled. The incremental setup has two
// workers more (at least four), named out of order, so that the first
// round (three workers) leaves one out and the order shows.
func Setups(workers int, integrations []string) []Setup {
	kueue := topology.KueueOptions{Integrations: integrations}
	inc := kueue
	inc.Dispatcher = topology.DispatcherIncremental
	ext := kueue
	ext.Dispatcher = ExternalDispatcher
	res := topology.KueueOptions{WorkerLostTimeout: dur(20 * time.Second), GCInterval: dur(15 * time.Second)}
	names := []string{"delta", "alpha", "charlie", "bravo", "echo", "foxtrot"}
	n := max(workers+2, 4)
	var incNames []string
	for i := range n {
		if i < len(names) {
			incNames = append(incNames, names[i])
		} else {
			incNames = append(incNames, "w"+string(rune('a'+i)))
		}
	}
	return []Setup{
		{Name: SetupAllAtOnce, Options: topology.Options{Workers: workers, Kueue: kueue},
			Doc: "AllAtOnce dispatcher (the default), the integrations asked for"},
		{Name: SetupIncremental, Options: topology.Options{WorkerNames: incNames, Kueue: inc},
			Doc: "Incremental dispatcher, workers named out of order"},
		{Name: SetupExternal, Options: topology.Options{Workers: workers, Kueue: ext},
			Doc: "a dispatcher Kueue does not implement: the scenario nominates"},
		{Name: SetupResilient, Options: topology.Options{Workers: workers, Kueue: res},
			Doc: "workerLostTimeout 20s, gcInterval 15s, for the outage and restart scenarios"},
		{Name: SetupHA, Options: topology.Options{Workers: workers}, HA: true,
			Doc: "the manager's Kueue as 2 replicas with leader election"},
	}
}

func dur(d time.Duration) *time.Duration { return &d }
