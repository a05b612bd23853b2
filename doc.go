// Package testkit is multikueue-testkit: fixtures and assertions for testing
// Kueue MultiKueue, one manager cluster dispatching jobs to N worker clusters.
//
// The packages follow the data flow of a test:
//
//	topology  one manager + N workers (local: real etcd, kube-apiserver,
//	          kube-controller-manager and Kueue processes per cluster; no Docker)
//	connect   how a worker is attached to the manager (kubeconfig Secret, ...)
//	workload  builders for the job objects a test submits
//	observe   a per-cluster history of every Workload, Job and MultiKueueCluster
//	assert    assertions that judge that history (SetupActive,
//	          ExactlyOnceAdmitted, NominationCleared, Finished, NoOrphans)
//	scenario  the canonical MultiKueue behaviours composed from the above
//
// A ten-line test:
//
//	func TestDispatch(t *testing.T) {
//		ctx := context.Background()
//		topo, err := local.New(ctx, topology.Options{Workers: 3}, local.Options{})
//		if err != nil {
//			t.Fatal(err)
//		}
//		topo.CloseWith(t)
//		env, err := scenario.Observe(ctx, topo)
//		if err != nil {
//			t.Fatal(err)
//		}
//		defer env.Close()
//		job := workload.NewJob("a", "default").Queue("user-queue").Requests("1", "1Gi").Obj()
//		if err := topo.Manager.Client.Create(ctx, job); err != nil {
//			t.Fatal(err)
//		}
//		assert.For(t, env.Check).ExactlyOnceAdmitted(ctx, job)
//	}
package testkit
