package local

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/multikueue-testkit/testkit/internal/assets"
)

// The KubeRay operator runs as its binary (github.com/ray-project/kuberay/
// ray-operator's main, at the version the Kueue under test requires in its
// go.mod: v1.6.2 for v0.19.2) on every worker of a topology with a Ray
// integration, with its CRDs (RayCluster, RayJob and RayService: its main
// always runs all three reconcilers) from the same module, leader election
// off, its health and metrics servers on loopback, no webhooks (its chart
// leaves them off too). The manager's RayJobs and RayClusters are
// MultiKueue's (spec.managedBy), which KubeRay leaves alone; the manager runs
// no operator.
//
// What no kubelet runs here is played: KWOK makes the head and worker pods
// Running and Ready on the worker's Nodes (so the RayCluster becomes
// ready), the submitter Job runs like any Job, and the Ray dashboard that KubeRay polls on the head Service
// (http://<head-svc>.<ns>.svc.cluster.local:8265) is rayHead: the operator
// runs with HTTP_PROXY pointing at it, so the requests that would go to the
// head pod come to the test process, which answers from the RayJob and its
// submitter Job (raydashboard.go).

// ensureKubeRay finds or builds the KubeRay operator binary at the version
// the Kueue binary bin requires in its go.mod.
func ensureKubeRay(ctx context.Context, ao assets.Options, bin assets.Kueue) (assets.Operator, error) {
	return ensureOperator(ctx, ao, bin, assets.KubeRayOperator())
}

// startKubeRay starts worker lc's Ray head stand-in and its KubeRay
// operator binary.
func (lc *localCluster) startKubeRay(ctx context.Context, op assets.Operator, o Options) error {
	head, err := startRayHead(lc.name, lc.cp.configAs(lc.cp.agent))
	if err != nil {
		return fmt.Errorf("cluster %q: the Ray dashboard stand-in: %w", lc.name, err)
	}
	lc.mu.Lock()
	lc.rayHead = head
	lc.mu.Unlock()
	b := &controllerBinary{name: "kuberay", cluster: lc.name, path: op.Path, version: op.Version,
		dir: filepath.Join(lc.cp.dir, "kuberay"), timeout: o.StartTimeout, noWebhooks: true}
	if err := b.allocate(lc.cp); err != nil {
		return err
	}
	kubeconfig := filepath.Join(b.dir, "kuberay.kubeconfig")
	if err := lc.cp.writeClientKubeconfig(kubeconfig, kuberayUser, lc.cp.kuberay); err != nil {
		return err
	}
	b.configure = func() error {
		b.args = []string{
			"--kubeconfig=" + kubeconfig,
			fmt.Sprintf("--metrics-addr=127.0.0.1:%d", b.metricsPort),
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", b.healthPort),
			"--enable-leader-election=false",
			"--log-stdout-encoder=console",
		}
		return nil
	}
	// Plain HTTP only: the API server (https, on loopback) is never proxied.
	b.env = []string{"HTTP_PROXY=" + head.url(), "http_proxy=" + head.url(), "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
	lc.mu.Lock()
	lc.binaries = append(lc.binaries, b)
	lc.mu.Unlock()
	return b.start(ctx)
}
