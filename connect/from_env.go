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
// getenv, with the guard on (see ByName): unset, "kubeconfig" or
// "kubeconfig-secret" give KubeconfigSecret{Guard: true}; "clusterprofile" or
// "cluster-profile" give ClusterProfile{Guard: true}. Anything else is an
// error naming the variable.
func FromEnv(getenv func(string) string) (topology.Connector, error) {
	return ByName(getenv(EnvConnector), true)
}

// ByName returns the connector with the given name ("" means the kubeconfig
// Secret), with or without the guard. Providers of clusters the user owns
// (topology/existing) default to no guard: it installs a
// ValidatingAdmissionPolicy on every worker.
func ByName(name string, guard bool) (topology.Connector, error) {
	switch name {
	case "", ConnectorKubeconfig, KubeconfigSecret{}.Name():
		return KubeconfigSecret{Guard: guard}, nil
	case ConnectorClusterProfile, ClusterProfile{}.Name():
		return ClusterProfile{Guard: guard}, nil
	default:
		return nil, fmt.Errorf("%s=%q: not a connector; use %q or %q", EnvConnector, name, ConnectorKubeconfig, ConnectorClusterProfile)
	}
}
