package topology

import "testing"

// TestNeedsAreTheManagers: the connector's needs go to the manager whole
// and to no worker (a worker with the ClusterProfile gate and no CRD exits).
func TestNeedsAreTheManagers(t *testing.T) {
	n := KueueNeeds{ClusterProfileCRD: true, FeatureGates: map[string]bool{"MultiKueueClusterProfile": true}}
	if got := n.For(RoleManager); !got.ClusterProfileCRD || !got.FeatureGates["MultiKueueClusterProfile"] {
		t.Errorf("manager: %+v; want the needs whole", got)
	}
	if got := n.For(RoleWorker); got.ClusterProfileCRD || len(got.FeatureGates) > 0 || len(got.CredentialsProviders) > 0 {
		t.Errorf("worker: %+v; want none", got)
	}
}
