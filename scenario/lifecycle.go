package scenario

import (
	"fmt"

	"github.com/multikueue-testkit/testkit/topology"
)

// NeedsLifecycleError is the error of a scenario that stops and starts a
// cluster's processes (WorkerOutage, ManagerRestart) on a cluster whose
// provider cannot (Cluster.Lifecycle is nil: existing clusters, kind, CAPZ).
// The TB form skips the test on it when the TB can skip.
type NeedsLifecycleError struct {
	Scenario string
	Cluster  string
	Provider string
}

func (e *NeedsLifecycleError) Error() string {
	return fmt.Sprintf("scenario %s: cluster %q has no Lifecycle: provider %q cannot stop and start its processes; run it on a topology whose provider can (topology/local)",
		e.Scenario, e.Cluster, e.Provider)
}

// lifecycle returns c's Lifecycle or a NeedsLifecycleError.
func (r *run) lifecycle(c *topology.Cluster) (topology.Lifecycle, error) {
	if c.Lifecycle == nil {
		return nil, &NeedsLifecycleError{Scenario: r.name, Cluster: c.Name, Provider: r.env.Topo.ProviderName}
	}
	return c.Lifecycle, nil
}
