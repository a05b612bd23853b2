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
	"path/filepath"
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
// examples call it from TestMain, before m.Run. With MKTK_PROVIDER=kind it
// builds the offline kind images instead (kind.Prepare); on the clusters
// MKTK_KUBECONFIGS names it does nothing.
//
// go test kills a test binary that runs longer than its -timeout plus a
// minute, TestMain included. So Prepare builds for as long as the binary has
// left after keeping TestReserve for the tests (with go test's default 10
// minutes: 8, which a cold build on 2 cores may or may not fit), waiting for
// another test binary's build as long, and when that runs out it stops,
// saying so: what was compiled stays in Go's build cache, so the next run
// goes on from there. With no -timeout (0) it builds to the end.
func Prepare(ctx context.Context, integrations ...string) error {
	start := time.Now()
	if _, attach, err := existing.FromEnv(); err != nil || attach {
		return err
	}
	build := func(ctx context.Context) error { return local.EnsureBinaries(ctx, local.Options{}, integrations...) }
	what, first := "the local topology's binaries", "go run github.com/multikueue-testkit/testkit/cmd/mktk assets"
	switch p := strings.TrimSpace(os.Getenv(EnvProvider)); p {
	case "", "local":
		if local.EnsureBinaries(ctx, local.Options{Assets: local.AssetOptions{NoBuild: true}}, integrations...) == nil {
			return nil // all cached
		}
	case "kind":
		ko, err := kind.OptionsFromEnv(os.Getenv)
		if err != nil {
			return err
		}
		build = func(ctx context.Context) error {
			return kind.Prepare(ctx, ko, os.Stderr, forKind(io.Discard, integrations)...)
		}
		what, first = "the offline kind images and their binaries", "go run github.com/multikueue-testkit/testkit/cmd/mktk kind node"
	default:
		return nil
	}
	t := testTimeout()
	if t <= 0 {
		return build(ctx)
	}
	budget := t + time.Minute - TestReserve
	if budget <= 0 {
		return fmt.Errorf("%s are not built yet and -timeout %s leaves no time to build them; build them first: `%s`", what, t, first)
	}
	bctx, cancel := context.WithDeadline(ctx, start.Add(budget))
	defer cancel()
	fmt.Fprintf(os.Stderr, "examples: building %s that are missing, for at most %s (this test binary's -timeout %s plus go test's minute, less %s for the tests)\n",
		what, budget.Round(time.Second), t, TestReserve)
	err := build(bctx)
	if err != nil && bctx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("%s were not all built within %s, what this test binary has (-timeout %s): "+
			"what was compiled stays in Go's build cache, so running the tests again goes on from there; "+
			"or build first with no time limit, `%s`, or give go test -timeout 40m (%v)",
			what, budget.Round(time.Second), t, first, err)
	}
	return err
}

// TestReserve is the part of a test binary's time Prepare leaves to the
// examples' tests (the longest example package runs in about a minute).
const TestReserve = 3 * time.Minute

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
		if ko.NamePrefix == "" {
			// go test runs example packages side by side: each gets kind
			// clusters of its own ("mktk-ginkgo-worker-1").
			ko.NamePrefix = kindPrefix(os.Args[0])
		}
		fmt.Fprintf(progress, "examples: %s=kind: 1 manager + %d workers on kind clusters %s*\n", EnvProvider, opts.Workers, ko.NamePrefix)
		opts.Kueue.Integrations = forKind(progress, opts.Kueue.Integrations)
		return kind.New(ctx, opts, ko)
	default:
		return nil, fmt.Errorf("examples: %s=%q: use \"local\" or \"kind\"", EnvProvider, p)
	}
	if !attach {
		return local.New(ctx, opts, local.Options{})
	}
	fmt.Fprintf(progress, "examples: %s set: attaching %d workers in %s mode\n", existing.EnvKubeconfigs, len(o.Workers), o.Mode)
	opts.Workers, opts.WorkerNames, opts.ManagerName = 0, nil, ""
	// Attached clusters run the integrations they run: the topology learns
	// them from the manager's Kueue, and the examples submit those kinds.
	opts.Kueue.Integrations = nil
	return existing.New(ctx, opts, o)
}

// Integrations are the Kueue integrations of the examples that show every
// job kind on the clusters the examples make: batch/Job, JobSet and RayJob
// (New leaves out what a provider cannot install; attached clusters run
// what they run).
func Integrations() []string {
	return []string{topology.IntegrationBatchJob, topology.IntegrationJobSet, topology.IntegrationRayJob}
}

// kindPrefix is the kind cluster name prefix of the example package whose
// test binary is argv0 ("/tmp/go-build…/ginkgo.test" → "mktk-ginkgo-").
func kindPrefix(argv0 string) string {
	name := strings.TrimSuffix(filepath.Base(argv0), ".test")
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.ToLower(name))
	if name == "" || len(name) > 16 {
		return kind.DefaultNamePrefix
	}
	return kind.DefaultNamePrefix + name + "-"
}

// forKind leaves out of integrations what the kind provider cannot install
// (the Ray integrations: no KubeRay chart, see topology/kind), saying so.
func forKind(progress io.Writer, integrations []string) []string {
	var out []string
	for _, in := range integrations {
		if in == topology.IntegrationRayJob || in == topology.IntegrationRayCluster {
			fmt.Fprintf(progress, "examples: %s=kind: %s left out (the kind provider cannot install the KubeRay operator)\n", EnvProvider, in)
			continue
		}
		out = append(out, in)
	}
	return out
}
