package topology

import "time"

// Timeouts are how long tests wait on a substrate: seconds on the local
// topology, minutes where kubelets pull images (kind) or clouds add Nodes
// (AKS). A provider suggests its own (TimeoutSuggester); Options.Timeouts
// raises or lowers any of them in one place; Topology.Timeouts is what the
// assertions and scenarios use where the caller set no bound of its own.
type Timeouts struct {
	// Progress bounds an assertion's wait while nothing changes anywhere in
	// the topology: assert.Checker.Timeout's default.
	Progress time.Duration
	// Start bounds the wait, after jobs were submitted, for one remote copy
	// of each kind to start (image pulls and Node provisioning included):
	// scenario.DispatchOptions.StartTimeout's default.
	Start time.Duration
}

// The local topology's pace, used where neither Options.Timeouts nor the
// provider says otherwise.
const (
	DefaultProgressTimeout = 2 * time.Minute
	DefaultStartTimeout    = 30 * time.Second
)

// Timeouts returns the topology's timeouts: each field of
// Spec.Options.Timeouts that is set, else the provider's suggestion
// (TimeoutSuggester), else DefaultProgressTimeout and DefaultStartTimeout.
func (t *Topology) Timeouts() Timeouts {
	var suggested Timeouts
	if s, ok := t.provider.(TimeoutSuggester); ok {
		suggested = s.SuggestedTimeouts()
	}
	pick := func(given, suggested, def time.Duration) time.Duration {
		switch {
		case given > 0:
			return given
		case suggested > 0:
			return suggested
		}
		return def
	}
	g := t.Spec.Timeouts
	return Timeouts{
		Progress: pick(g.Progress, suggested.Progress, DefaultProgressTimeout),
		Start:    pick(g.Start, suggested.Start, DefaultStartTimeout),
	}
}
