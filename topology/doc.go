// Package topology is what every other package of the testkit builds on: a
// Topology of one MultiKueue manager and N workers (Cluster: name, role,
// client, rest config, kubeconfig, and Lifecycle when the provider can stop
// and start its parts), the Options that describe it and their resolved Spec,
// the Provider interface that makes clusters (local, existing, kind, capz
// implement it), the Connector interface that connects workers to the manager
// (package connect implements it), and the MultiKueue objects New creates
// and waits for: the MultiKueueConfig, MultiKueueClusters, AdmissionCheck,
// ClusterQueue and LocalQueues on every cluster.
//
// New asks a Provider for the clusters, reads how their Kueue is configured
// (Topology.Facts, from the cluster: version, gates, dispatcher, GC interval,
// the nomination-clearing policy), connects the workers and waits until
// MultiKueue is Active:
//
//	topo, err := topology.New(ctx, provider, topology.Options{Workers: 3})
//	if err != nil { ... }
//	topo.CloseWith(t)
//
// Most tests call a provider's own New instead (local.New, existing.New,
// kind.New, capz.New), which does the same with that provider; each takes
// (ctx, topology.Options, the provider's Options).
//
// What a provider may offer beyond Provider (keeping its clusters, audit
// logs, per-cluster directories, reaching or killing Kueue replicas, a
// Configuration handed over) is declared in capabilities.go, each a small
// interface with its fallback; docs/providers.md lists them.
package topology
