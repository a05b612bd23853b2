// Package substrate chooses the clusters the bundled examples run on: the
// embedded local topology by default, or, when MKTK_KUBECONFIGS is set, the
// clusters it names (see topology/existing.FromEnv), adopted or wired as
// MKTK_ATTACH_MODE says. The examples' features are the same either way.
package substrate

import (
	"context"
	"fmt"
	"io"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// New starts or attaches a topology. opts describe the local topology; on
// existing clusters only its Progress (and, in wire mode, its quotas, queues
// and connector) are used: the clusters come from the environment.
func New(ctx context.Context, opts topology.Options) (*topology.Topology, error) {
	o, attach, err := existing.FromEnv()
	if err != nil {
		return nil, err
	}
	if !attach {
		return local.New(ctx, opts, local.Options{})
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "examples: %s set: attaching %d workers in %s mode\n", existing.EnvKubeconfigs, len(o.Workers), o.Mode)
	opts.Workers, opts.WorkerNames, opts.ManagerName = 0, nil, ""
	return existing.New(ctx, o, opts)
}
