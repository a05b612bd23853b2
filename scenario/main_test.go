package scenario_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// sharedEnv is a topology shared by the tests of one configuration: started
// by the first test that asks for it, closed by TestMain after every test ran.
// Tests on it run one after another, use their own job names, and leave it
// healthy; scenarios judge topology-wide history from their own start.
type sharedEnv struct {
	name string
	opts topology.Options

	once  sync.Once
	topo  *topology.Topology
	env   *scenario.Env
	err   error
	setup time.Duration
}

// get returns the shared Env, starting it on first use.
func (s *sharedEnv) get(t *testing.T) *scenario.Env {
	t.Helper()
	s.once.Do(func() {
		ctx := context.Background()
		start := time.Now()
		s.topo, s.err = local.New(ctx, s.opts, local.Options{})
		if s.err != nil {
			return
		}
		s.env, s.err = scenario.Observe(ctx, s.topo)
		s.setup = time.Since(start)
	})
	if s.err != nil {
		t.Fatalf("shared topology %s: %v", s.name, s.err)
	}
	if s.setup > 0 {
		t.Logf("shared topology %s: started in %s (by this test)", s.name, s.setup.Round(time.Millisecond))
		s.setup = 0
	}
	return s.env
}

func (s *sharedEnv) close() {
	if s.env != nil {
		s.env.Close()
	}
	if s.topo != nil {
		if err := s.topo.Close(context.Background()); err != nil {
			fmt.Fprintf(os.Stderr, "shared topology %s: teardown: %v\n", s.name, err)
		}
	}
}

func dur(d time.Duration) *time.Duration { return &d }

// Shared configurations.
var (
	// mixed: 1 manager + 3 workers, AllAtOnce, batch/Job, JobSet and RayJob
	// (the local workers run the JobSet controller and the KubeRay operator).
	mixed = &sharedEnv{name: "mixed", opts: topology.Options{Workers: 3, Kueue: topology.KueueOptions{
		Integrations: []string{topology.IntegrationBatchJob, topology.IntegrationJobSet, topology.IntegrationRayJob},
	}}}
	// kubeflow: 1 manager + 2 workers with every integration the local
	// topology runs: batch/Job, JobSet, RayJob, RayCluster, RayService, every Kubeflow
	// training-operator kind, the MPIJob, the AppWrapper, the TrainJob, the built-in pod,
	// Deployment and StatefulSet integrations and the LeaderWorkerSet (the
	// workers run the JobSet controller, the KubeRay operator, the
	// training-operator, the MPI operator, the Kubeflow Trainer and the AppWrapper controller;
	// every cluster the LeaderWorkerSet controller and, in its
	// kube-controller-manager, the Deployment, ReplicaSet and StatefulSet
	// controllers), and MultiKueue's garbage collector off, so that the
	// strays a test makes stay until it removes them.
	kubeflow = &sharedEnv{name: "kubeflow", opts: topology.Options{Workers: 2, Kueue: topology.KueueOptions{
		GCInterval: dur(0),
		Integrations: []string{topology.IntegrationBatchJob, topology.IntegrationJobSet, topology.IntegrationRayJob, topology.IntegrationRayCluster, topology.IntegrationRayService,
			topology.IntegrationPyTorchJob, topology.IntegrationTFJob, topology.IntegrationXGBoostJob, topology.IntegrationPaddleJob,
			topology.IntegrationJAXJob, topology.IntegrationMPIJob, topology.IntegrationAppWrapper, topology.IntegrationTrainJob,
			topology.IntegrationPod, topology.IntegrationDeployment, topology.IntegrationStatefulSet, topology.IntegrationLeaderWorkerSet},
	}}}
	// resilient: 1 manager + 3 workers with a 20 s workerLostTimeout and a
	// 15 s gcInterval, for the outage and restart scenarios.
	resilient = &sharedEnv{name: "resilient", opts: topology.Options{Workers: 3, Kueue: topology.KueueOptions{
		WorkerLostTimeout: dur(20 * time.Second),
		GCInterval:        dur(15 * time.Second),
	}}}
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range []*sharedEnv{mixed, resilient, kubeflow} {
		s.close()
	}
	os.Exit(code)
}
