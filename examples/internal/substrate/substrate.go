// Package substrate chooses the clusters the bundled examples run on: the
// embedded local topology by default; kind clusters when MKTK_PROVIDER=kind
// (see topology/kind; MKTK_KIND_KEEP and MKTK_KIND_NODE_IMAGE tune them);
// or, when MKTK_KUBECONFIGS is set, the clusters it names (see
// topology/existing.FromEnv), adopted or wired as MKTK_ATTACH_MODE says. The
// examples' features are the same either way.
package substrate

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/kind"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// EnvProvider picks the provider: "local" (default) or "kind".
const EnvProvider = "MKTK_PROVIDER"

// New starts or attaches a topology. opts describe the local topology; on
// existing clusters only its Progress (and, in wire mode, its quotas, queues
// and connector) are used: the clusters come from the environment.
func New(ctx context.Context, opts topology.Options) (*topology.Topology, error) {
	o, attach, err := existing.FromEnv()
	if err != nil {
		return nil, err
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	switch p := strings.TrimSpace(os.Getenv(EnvProvider)); p {
	case "", "local":
	case "kind":
		if attach {
			return nil, fmt.Errorf("examples: %s=kind and %s are both set: pick one", EnvProvider, existing.EnvKubeconfigs)
		}
		ko, err := kind.OptionsFromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "examples: %s=kind: 1 manager + %d workers on kind clusters\n", EnvProvider, opts.Workers)
		return kind.New(ctx, opts, ko)
	default:
		return nil, fmt.Errorf("examples: %s=%q: use \"local\" or \"kind\"", EnvProvider, p)
	}
	if !attach {
		return local.New(ctx, opts, local.Options{})
	}
	fmt.Fprintf(progress, "examples: %s set: attaching %d workers in %s mode\n", existing.EnvKubeconfigs, len(o.Workers), o.Mode)
	opts.Workers, opts.WorkerNames, opts.ManagerName = 0, nil, ""
	return existing.New(ctx, o, opts)
}
