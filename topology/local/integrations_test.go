package local

import (
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/topology"
)

// TestRunnableIntegrations: the local topology refuses, naming the field, an
// integration whose controller it does not run, and takes the four it runs.
func TestRunnableIntegrations(t *testing.T) {
	ok := []string{topology.IntegrationBatchJob, topology.IntegrationJobSet, topology.IntegrationRayJob, topology.IntegrationRayCluster}
	if err := runnableIntegrations(ok); err != nil {
		t.Errorf("runnableIntegrations(%q) = %v", ok, err)
	}
	err := runnableIntegrations([]string{topology.IntegrationBatchJob, topology.IntegrationMPIJob})
	if err == nil || !strings.Contains(err.Error(), "Integrations[1]") || !strings.Contains(err.Error(), topology.IntegrationMPIJob) {
		t.Errorf("runnableIntegrations with MPIJob = %v, want an error naming Integrations[1] and %q", err, topology.IntegrationMPIJob)
	}
}
