package connect

import (
	"fmt"

	"github.com/multikueue-testkit/testkit/topology"
)

// EnvConnector is the environment variable that picks the connector of a
// topology whose Options.Connector is nil (local.New honours it, and with it
// every example suite), so that a whole test suite runs once per connector
// without copies:
//
//	MKTK_CONNECTOR=clusterprofile go test ./examples/...
const EnvConnector = "MKTK_CONNECTOR"

// Connector names accepted in $MKTK_CONNECTOR (a connector's Name() works
// too).
const (
	ConnectorKubeconfig     = "kubeconfig"
	ConnectorClusterProfile = "clusterprofile"
)

// FromEnv returns the default connector named by $MKTK_CONNECTOR, read with
// getenv: unset, "kubeconfig" or "kubeconfig-secret" give
// KubeconfigSecret{Guard: true}; "clusterprofile" or "cluster-profile" give
// ClusterProfile{Guard: true}. Anything else is an error naming the variable.
func FromEnv(getenv func(string) string) (topology.Connector, error) {
	switch v := getenv(EnvConnector); v {
	case "", ConnectorKubeconfig, KubeconfigSecret{}.Name():
		return KubeconfigSecret{Guard: true}, nil
	case ConnectorClusterProfile, ClusterProfile{}.Name():
		return ClusterProfile{Guard: true}, nil
	default:
		return nil, fmt.Errorf("%s=%q: not a connector; use %q or %q", EnvConnector, v, ConnectorKubeconfig, ConnectorClusterProfile)
	}
}
