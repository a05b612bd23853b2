// Package connect attaches worker clusters to the manager. A connector
// prepares credentials on the worker and returns the MultiKueueCluster
// clusterSource; topology.Options.Connector takes any of them, so tests switch
// between a kubeconfig Secret and a ClusterProfile without other changes.
package connect
