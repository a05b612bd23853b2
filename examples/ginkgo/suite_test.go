// Package ginkgo shows the assertions in a Ginkgo suite: assert.For takes
// GinkgoT(), and Gomega takes a Checker's error with Succeed().
package ginkgo

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/examples/internal/substrate"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestMain builds or finds the binaries before any spec's timeout starts.
func TestMain(m *testing.M) { os.Exit(substrate.Main(m)) }

func TestMultiKueue(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "MultiKueue with multikueue-testkit")
}

var (
	topo *topology.Topology
	env  *scenario.Env
)

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	topo, err = substrate.New(ctx, topology.Options{Workers: 2})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(topo.Close(context.Background())).To(Succeed()) })
	env, err = scenario.Observe(ctx, topo)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Close)
}, NodeTimeout(5*time.Minute))

var _ = Describe("a batch/Job", func() {
	It("is admitted on exactly one worker and cleaned up", func(ctx SpecContext) {
		q := topo.Spec.Queues
		size := topo.JobSize() // what the provider's nodes fit: 1 CPU here, 100m on kind
		job := workload.NewJob("ginkgo", q.Namespaces[0]).Queue(q.LocalQueue).Requests(size.CPU, size.Memory).RunFor(time.Second).Obj()
		Expect(topo.Manager.Client.Create(ctx, job)).To(Succeed())
		assert.For(GinkgoT(), env.Check).ExactlyOnceAdmitted(ctx, job)
		Expect(env.Check.NominationCleared(ctx, job)).To(Succeed())
		Expect(env.Check.Finished(ctx, job)).To(Succeed())
		Expect(env.Check.NoOrphans(ctx)).To(Succeed())
	}, NodeTimeout(5*time.Minute))
})
