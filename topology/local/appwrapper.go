package local

import (
	"context"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology"
)

// The AppWrapper controller (workload.codeflare.dev/v1beta2) runs as a
// binary built from github.com/project-codeflare/appwrapper at the version
// the Kueue under test requires in its go.mod (v1.2.2 for v0.19.2), on every
// worker of a topology with the AppWrapper integration: upstream's
// controllers and webhooks (pkg/controller) with upstream's default
// configuration, under a main of this library's (internal/assets/mains),
// because upstream's serves its webhooks on the fixed port 9443 behind a
// cert rotator that waits for a Secret volume and reads its configuration
// from a ConfigMap in its own namespace. Its CRD and webhook registrations
// come from the same module (config/crd/bases, config/webhook). The
// manager's AppWrappers are MultiKueue's (spec.managedBy), which the
// controller leaves alone; the manager runs none. The controller creates the
// wrapped Job, which the Job controller runs and KWOK's pods end.

// appWrapperWebhooks is the AppWrapper's webhook manifest in its module, and
// appWrapperWebhookPrefix prefixes its registrations' names.
const (
	appWrapperWebhooks      = "config/webhook/manifests.yaml"
	appWrapperWebhookPrefix = "appwrapper-"
)

// startAppWrapper starts worker lc's AppWrapper controller and registers the
// webhooks it serves.
func (lc *localCluster) startAppWrapper(ctx context.Context, c *topology.Cluster, op assets.Operator, hooks webhookConfigs, o Options) error {
	return lc.startOurMain(ctx, c, op, hooks, appWrapperUser, lc.cp.appWrapper, o)
}
