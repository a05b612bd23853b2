// Package substrate chooses the clusters the bundled examples run on: the
// embedded local topology by default; kind clusters when MKTK_PROVIDER=kind
// (see topology/kind; MKTK_KIND_KEEP and MKTK_KIND_NODE_IMAGE tune them);
// or, when MKTK_KUBECONFIGS is set, the clusters it names (see
// topology/existing.FromEnv), adopted or wired as MKTK_ATTACH_MODE says. The
// examples' features are the same either way.
package substrate

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/kind"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// EnvProvider picks the provider: "local" (default) or "kind".
const EnvProvider = "MKTK_PROVIDER"

// Prepare finds or builds the local topology's binaries (Kubernetes, Kueue
// and the operators of integrations) before any test timeout runs: the
// examples call it from TestMain, before m.Run. It does nothing when the
// examples run on kind or on the clusters MKTK_KUBECONFIGS names.
//
// go test kills a test binary that runs longer than its -timeout plus a
// minute, TestMain included, and a cold build of every binary takes longer
// than go test's default 10 minutes on 2 cores. So when something is
// missing and the binary's -timeout is shorter than ColdBuildBudget, Prepare
// fails at once, saying how to build first, instead of being killed
// halfway through the build.
func Prepare(ctx context.Context, integrations ...string) error {
	if _, attach, err := existing.FromEnv(); err != nil || attach {
		return err
	}
	if p := strings.TrimSpace(os.Getenv(EnvProvider)); p != "" && p != "local" {
		return nil
	}
	if local.EnsureBinaries(ctx, local.Options{Assets: local.AssetOptions{NoBuild: true}}, integrations...) == nil {
		return nil // all cached
	}
	if t := testTimeout(); t > 0 && t < ColdBuildBudget {
		return fmt.Errorf("the local topology's binaries (kube-apiserver, etcd, kube-controller-manager, Kueue) are not built yet; "+
			"a cold build takes 15-25 minutes on 2 cores and go test kills a test binary after its -timeout (%s) plus a minute, TestMain included. "+
			"Build them first, with no time limit: `go run github.com/multikueue-testkit/testkit/cmd/mktk assets` (then run the tests again), "+
			"or run the tests with -timeout %s or more", t, ColdBuildBudget)
	}
	return local.EnsureBinaries(ctx, local.Options{}, integrations...)
}

// ColdBuildBudget is the -timeout a test binary needs to build every
// binary from nothing on 2 cores, with room to run its tests.
const ColdBuildBudget = 40 * time.Minute

// testTimeout is the test binary's -test.timeout (0: none, or not a test
// binary). It parses the command line, which TestMain may do.
func testTimeout() time.Duration {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	d, _ := time.ParseDuration(f.Value.String())
	return d
}

// Main is TestMain for the examples: Prepare, then the tests. A build that
// fails, or cannot fit the test timeout, ends the run with its error.
func Main(m interface{ Run() int }) int {
	if err := Prepare(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "examples:", err)
		return 1
	}
	return m.Run()
}

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
