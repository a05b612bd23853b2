//go:build e2e

package capzexample

import (
	"context"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/topology"
)

// EnvIntervals is the spec's intervals as CAPZ's e2e config writes them
// ("20m,10s": timeout, polling); default the provider's suggestion.
const EnvIntervals = "MKTK_CAPZ_INTERVALS"

// TestCAPZE2E runs the spec below as CAPZ's e2e suite runs its own: with
// the e2e build tag and a label to focus on,
//
//	MKTK_CAPZ_MANAGEMENT_KUBECONFIG=… go test -tags e2e ./examples/capz -run TestCAPZE2E -timeout 120m -args -ginkgo.label-filter=MultiKueue
//
// In CAPZ's own suite, copy the It into test/e2e/azure_test.go's Describe
// and pass bootstrapClusterProxy, e2eConfig.GetIntervals(specName,
// "wait-multikueue") and artifactFolder.
func TestCAPZE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "multikueue-testkit on CAPZ")
}

var _ = Describe("Workload cluster creation", func() {
	for _, conn := range []struct {
		name string
		c    topology.Connector
	}{{"kubeconfig Secrets", connect.KubeconfigSecret{}}, {"ClusterProfiles", connect.ClusterProfile{}}} {
		It("runs MultiKueue with "+conn.name, Label("MultiKueue"), func(ctx SpecContext) {
			path := os.Getenv(EnvManagement)
			if path == "" {
				Skip(EnvManagement + " is not set: this spec needs a CAPI management cluster with CAPZ and an AKS ClusterClass (see docs/capz.md)")
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			Expect(err).NotTo(HaveOccurred())
			c, err := client.New(cfg, client.Options{})
			Expect(err).NotTo(HaveOccurred())
			in, err := inputFromEnv()
			Expect(err).NotTo(HaveOccurred())
			if v := os.Getenv(EnvIntervals); v != "" {
				for _, s := range strings.Split(v, ",") {
					in.Intervals = append(in.Intervals, strings.TrimSpace(s))
				}
			}
			in.Connector = conn.c
			in.Progress = GinkgoWriter
			in.ArtifactFolder = os.Getenv("ARTIFACTS")
			RunMultiKueue(context.WithoutCancel(ctx), GinkgoT(), kubeconfigProxy{name: "bootstrap", cfg: cfg, c: c}, in)
		})
	}
})
