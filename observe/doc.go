// Package observe records what happens on every cluster of a topology.
//
// An Observer watches Workloads, job objects (batch Jobs; JobSets, RayJobs,
// the Kubeflow training jobs, MPIJobs and AppWrappers when their Kueue
// integration is on:
// KnownJobKinds) and (on the manager)
// MultiKueueClusters on each cluster through informers, and turns every change
// into transitions with a timestamp and the cluster's name: quota reserved,
// admitted, evicted, finished, deleted, nominatedClusterNames and clusterName
// changes, admission-check states, remote copies created and deleted (each
// with its UID, so a reused name is a new object), job status changes, spec
// and label changes (Modified), MultiKueueCluster Active changes. Assertions judge this
// history, so a violation that lasts 300 ms is still seen after it is gone.
//
// Each event carries the object's MultiKueue labels (origin,
// prebuilt-workload-name): FromMultiKueue tells a remote copy from a worker's
// own object that merely has the same name.
//
// Memory is bounded: the Observer keeps, per object, its last state on each
// cluster and at most Options.MaxEventsPerObject transitions; it never keeps
// copies of object versions. It needs only clients, so it works the same on
// local and on real clusters. Its informers cost one list and one watch per
// kind per cluster, whatever the number of workloads.
package observe
