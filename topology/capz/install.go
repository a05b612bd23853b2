package capz

import "github.com/multikueue-testkit/testkit/topology/install"

// KueueInstall says how Kueue gets onto the clusters Provision creates:
// install.Step (Kueue, JobSet when the integrations enable it, with
// install.Helm unless Installer says otherwise), or nothing with Skip.
type KueueInstall struct {
	// Skip installs nothing: Kueue runs there already (the ClusterClass
	// installs it as an addon, for instance). The clusters are still
	// checked for Kueue's CRDs.
	Skip bool
	install.Step
}
