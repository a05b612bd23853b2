// Package capz runs MultiKueue topologies on Cluster API Provider Azure
// (CAPZ): AKS clusters made from a ClusterClass, with MachinePool workers.
//
// Two ways in, both ending in topology/existing:
//
//   - Attach: the Clusters exist (a CAPZ e2e spec made them). Select reads
//     each one's kubeconfig Secret "<cluster>-kubeconfig" (key "value") on
//     the management cluster, by Cluster name or by a label selector on the
//     Cluster objects, and existing.New attaches them in adopt or wire mode.
//     A CAPZ spec that holds framework.ClusterProxy values for the workload
//     clusters needs nothing from here: existing.Proxy takes them as they
//     are (GetName, GetRESTConfig).
//
//   - New (provision): the manager and worker Clusters are created on the
//     management cluster with spec.topology.classRef naming an AKS
//     ClusterClass, a Kubernetes version, MachinePool workers (replicas, or
//     autoscaler min/max annotations) and pass-through variables; they are
//     created in parallel and waited for (ReadyConditions, the kubeconfig
//     Secret, each pool's ready replicas) with a line of progress whenever
//     one changes and one budget; Kueue is installed with topology/install;
//     MultiKueue is wired by a connector. Close deletes the Clusters and
//     waits for them, within a budget, naming what is left.
//
// CAPI objects are unstructured (cluster.x-k8s.io/v1beta2, the storage
// version of CAPI v1.13's CRDs) with small typed mirrors of the fields used:
// CAPI's Go types need newer k8s.io modules than the testkit pins, and its
// test framework (ClusterProxy) needs Go and k8s.io versions this module
// cannot take.
//
// What is tested, and how: everything above runs in this package's tests on
// a local management API server with CAPI v1.13.5's CRDs (read from the
// module zip) and package capztest's simulated infrastructure controller,
// which plays CAPI + CAPZ: it makes the MachinePools of each Cluster's
// topology, sets the conditions and ready replicas, and writes kubeconfig
// Secrets that point at local clusters standing in for AKS. Kueue's Helm
// installation is rendered offline there (installing needs nodes). Nothing
// of this package has been run against Azure.
package capz
