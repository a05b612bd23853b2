package connect

import (
	"fmt"
	"os"

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

// EnvGuard is the environment variable that turns the guard on for the
// connector FromEnv returns: "1" or "true" on, unset, "0" or "false" off.
// The guard is protection for clusters that hold other people's objects; a
// test of what MultiKueue does runs without it (the default everywhere).
const EnvGuard = "MKTK_GUARD"

// FromEnv returns the default connector named by $MKTK_CONNECTOR, read with
// getenv: unset, "kubeconfig" or "kubeconfig-secret" give KubeconfigSecret;
// "clusterprofile" or "cluster-profile" give ClusterProfile; the guard is on
// when $MKTK_GUARD says so (EnvGuard). Anything else is an error naming the
// variable.
func FromEnv(getenv func(string) string) (topology.Connector, error) {
	var guard bool
	switch v := getenv(EnvGuard); v {
	case "", "0", "false":
	case "1", "true":
		guard = true
	default:
		return nil, fmt.Errorf("%s=%q: want 1, true, 0 or false", EnvGuard, v)
	}
	return ByName(getenv(EnvConnector), guard)
}

// Default is the connector a topology runs with when
// topology.Options.Connector is nil, for every provider of this module (each
// is a topology.ConnectorDefaulter answering with it): the one
// $MKTK_CONNECTOR names, with the guard when $MKTK_GUARD says so
// (FromEnv of the process environment); unset, the kubeconfig Secret
// without the guard.
func Default() (topology.Connector, error) { return FromEnv(os.Getenv) }

// ByName returns the connector with the given name ("" means the kubeconfig
// Secret), with or without the guard (it installs a
// ValidatingAdmissionPolicy on every worker).
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
