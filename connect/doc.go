// Package connect attaches worker clusters to the manager. A connector
// prepares credentials on the worker and returns the MultiKueueCluster
// clusterSource; topology.Options.Connector takes any of them, so tests switch
// between a kubeconfig Secret and a ClusterProfile without other changes.
//
// Two edits of a running connection work on either source, reading what the
// worker's MultiKueueCluster names: Sever points its server at an
// unreachable address (a lost worker, credentials untouched) and Restore
// writes it back; Rotate gives MultiKueue a new identity on the worker and
// Revoke deletes the old one (a credential rotation).
package connect
