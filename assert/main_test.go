package assert_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// env is one topology shared by this package's tests: 1 manager + 2 workers
// with MultiKueue garbage collection off, so that injected strays stay until
// a test removes them, and the JobSet integration on (so JobSets are watched). Tests run one after another and leave it healthy.
var env *scenario.Env

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx := context.Background()
	off := time.Duration(0)
	topo, err := local.New(ctx, topology.Options{Workers: 2, Kueue: topology.KueueOptions{
		GCInterval:   &off,
		Integrations: []string{topology.IntegrationBatchJob, topology.IntegrationJobSet},
	}}, local.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "assert tests: topology:", err)
		return 1
	}
	defer topo.Close(ctx)
	env, err = scenario.Observe(ctx, topo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "assert tests: observer:", err)
		return 1
	}
	defer env.Close()
	return m.Run()
}
