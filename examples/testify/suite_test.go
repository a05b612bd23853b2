// Package testify shows the assertions in a testify suite: assert.For takes
// suite.T(), and every Checker method returns an error for require.NoError.
package testify

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/examples/internal/substrate"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

type MultiKueueSuite struct {
	suite.Suite
	topo *topology.Topology
	env  *scenario.Env
}

func (s *MultiKueueSuite) SetupSuite() {
	ctx := context.Background()
	topo, err := substrate.New(ctx, topology.Options{Workers: 2})
	s.Require().NoError(err)
	s.topo = topo
	s.env, err = scenario.Observe(ctx, topo)
	s.Require().NoError(err)
}

func (s *MultiKueueSuite) TearDownSuite() {
	if s.env != nil {
		s.env.Close()
	}
	if s.topo != nil {
		s.NoError(s.topo.Close(context.Background()))
	}
}

func (s *MultiKueueSuite) TestJobRunsOnceAndIsCleanedUp() {
	ctx := context.Background()
	q := s.topo.Spec.Queues
	size := s.topo.JobSize() // what the provider's nodes fit: 1 CPU here, 100m on kind
	job := workload.NewJob("testify", q.Namespaces[0]).Queue(q.LocalQueue).Requests(size.CPU, size.Memory).RunFor(time.Second).Obj()
	s.Require().NoError(s.topo.Manager.Client.Create(ctx, job))
	a := assert.For(s.T(), s.env.Check)
	a.ExactlyOnceAdmitted(ctx, job)
	a.LosersCleaned(ctx, job)
	a.StatusSynced(ctx, job)
	require.NoError(s.T(), s.env.Check.NoOrphans(ctx))
}

// TestMain builds or finds the binaries before any test's timeout starts.
func TestMain(m *testing.M) { os.Exit(substrate.Main(m)) }

func TestMultiKueueSuite(t *testing.T) { suite.Run(t, new(MultiKueueSuite)) }
