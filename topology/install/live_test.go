package install_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
)

// liveEnv names the kubeconfig of a real cluster (with a kubelet and access
// to registry.k8s.io) for TestKueueLive.
const liveEnv = "MKTK_INSTALL_KUBECONFIG"

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestKueueLive installs Kueue on the cluster of $MKTK_INSTALL_KUBECONFIG,
// waits for it as Kueue() does (Deployment Available, webhook endpoints,
// leader Lease), creates a ResourceFlavor through the webhooks, installs
// again (an upgrade) and uninstalls, which deletes Kueue's CRDs: use a
// throwaway cluster (kind, for example).
func TestKueueLive(t *testing.T) {
	path := os.Getenv(liveEnv)
	if path == "" {
		t.Skipf("set %s to the kubeconfig of a throwaway cluster with a kubelet to install Kueue on it (uninstalling deletes Kueue's CRDs)", liveEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("%s: %v", liveEnv, err)
	}
	scheme, err := topology.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cluster := &topology.Cluster{Name: "live", Role: topology.RoleManager, Config: cfg, Client: cl}
	spec, err := topology.Options{Workers: 1}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	opts := install.KueueOptions{Spec: spec, Progress: logWriter{t}}
	start := time.Now()
	rel, err := install.Kueue(ctx, cluster, opts)
	if rel != nil {
		t.Cleanup(func() {
			if err := rel.Uninstall(context.Background()); err != nil {
				t.Errorf("uninstall: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Kueue installed and ready in %s: %s", time.Since(start).Round(time.Second), rel)

	rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "install-live-test"}}
	start = time.Now()
	if err := install.CreateThroughWebhooks(ctx, cl, rf, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("first write through the webhooks accepted after %s", time.Since(start).Round(100*time.Millisecond))
	if err := cl.Delete(ctx, rf); err != nil {
		t.Error(err)
	}

	again, err := install.Kueue(ctx, cluster, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Upgraded || again.Revision != rel.Revision+1 {
		t.Errorf("second install: %s, want an upgrade to revision %d", again, rel.Revision+1)
	}
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(spec.Kueue.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			t.Logf("pod %s: %s (%s)", p.Name, c.Image, c.ImagePullPolicy)
		}
	}
}
