// Package kind runs a topology on kind clusters (sigs.k8s.io/kind v0.33.0,
// its Go API): one kind cluster per topology cluster, on a node image built
// here offline (package nodeimage: Kubernetes v1.36.3 from its modules, no
// registry needed) unless Options.NodeImage names one, with Kueue (and the JobSet controller when
// that integration is on) installed by topology/install, then wired with
// MultiKueue exactly as topology/existing wires clusters you already have:
// the same assertions, the same Close semantics, Kueue's configuration read
// back from the manager.
//
//	topo, err := kind.New(ctx, topology.Options{Workers: 2}, kind.Options{})
//	if err != nil { t.Fatal(err) }
//	topo.CloseWith(t)
//
// Needs a container runtime kind can drive (docker, podman or nerdctl) with
// its daemon reachable; Detect says whether there is one and, if not, what
// was looked for; `mktk kind probe` says whether that engine can run kind's
// node containers (on a host whose capability bounding set is short, only
// with the mktk-runc shim: `mktk kind host enable`). The bundled examples run here with
// MKTK_PROVIDER=kind go test ./examples/...
//
// What it does, in order:
//
//  1. Clusters: kind's List; a kind cluster named NamePrefix+name that
//     exists is reused and never deleted; the others are created,
//     Options.Parallel at a time, each with its kubeconfig written to a file
//     in the provider's temporary directory (kind would otherwise merge it
//     into ~/.kube/config). Workers get Kueue's e2e token expiry patch
//     (WorkerTokenMaxExpiration).
//  2. Two addresses per cluster: the external kubeconfig (127.0.0.1:<port>)
//     for the test process (Cluster.Config), the internal one
//     (https://<kind name>-control-plane:6443 on the runtime's "kind"
//     network) for the manager's Kueue (Cluster.ManagerServer), which the
//     connectors write into the credentials they give Kueue.
//  3. Images: with docker, whatever of the following the engine lacks is
//     built first (Prepare does it before any test timeout): the node
//     image, the Kueue and JobSet controller images from the same
//     module-built binaries the local topology runs, and the job image
//     (busybox from Debian's busybox-static). Then the Kueue and JobSet
//     controller images the charts deploy and
//     the job image of the workload builders (topology.DefaultJobImage), plus
//     Options.ExtraImages, are saved from the local runtime and loaded into
//     the nodes (kind's nodeutils.LoadImageArchive) when present locally;
//     the charts pull IfNotPresent, so no node pulls what was loaded.
//     Provider.Images lists what was loaded and what was not.
//  4. Kueue with topology/install on every cluster, the configuration the
//     local topology runs (topology.Spec.KueueConfiguration plus the
//     connector's needs); then a dry-run write waits for Kueue's webhooks.
//  5. MultiKueue objects with the connector (default connect.Default, as on
//     the local topology: no guard unless $MKTK_GUARD=1), facts from the
//     manager.
//
// Close deletes the clusters the provider created (also after a failed
// Provision) unless Options.Keep, never the reused ones, and removes the
// temporary directory; with kept or reused clusters it first deletes the
// objects the topology created, as for existing clusters.
//
// The ClusterProfile connector works: its secretreader plugin goes into the
// manager's Kueue pod from an image built here (Options.CredentialsPlugin,
// PluginCommand). Not supported: the Ray integrations (install.KubeRay
// installs the operator, but this provider builds no KubeRay image to load
// into the nodes; see ErrNoKubeRayImage).
package kind

import (
	"context"

	"github.com/multikueue-testkit/testkit/topology"
)

// New creates (or reuses) the kind clusters of a topology, installs Kueue
// and wires MultiKueue. On error everything it created is deleted. Close
// the topology when done.
func New(ctx context.Context, opts topology.Options, o Options) (*topology.Topology, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	spec, err := opts.Resolve()
	if err != nil {
		return nil, err
	}
	p := &Provider{opts: o}
	if _, err := p.members(spec); err != nil {
		return nil, err
	}
	if err := unsupportedIntegrations(spec); err != nil {
		return nil, err
	}
	if p.rt, err = Detect(ctx, o.Runtime); err != nil {
		return nil, err
	}
	return topology.New(ctx, p, opts)
}
