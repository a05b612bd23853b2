package existing_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// The bundled examples run unchanged on clusters the user already has:
// a local topology stands for them, its kubeconfigs are written to a
// directory, and `go test ./examples/...` runs with MKTK_KUBECONFIGS pointing
// there (adopt mode). It is the main job's command, so it is skipped in
// -short runs.
func TestExamplesRunOnAttachedClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the examples in a child go test; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to run the examples with")
	}
	ctx := context.Background()
	topo, err := local.New(ctx, topology.Options{Workers: 2}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	dir := t.TempDir()
	for _, c := range topo.Clusters() {
		if err := os.WriteFile(filepath.Join(dir, c.Name+".kubeconfig"), c.Kubeconfig, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(runCtx, goBin, "test", "-count=1", "-p", "1", "./examples/...")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), existing.EnvKubeconfigs+"="+dir, existing.EnvAttachMode+"=adopt")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("go test ./examples/... on the attached clusters: %v\n%s", err, text)
	}
	for _, pkg := range []string{"examples/ginkgo", "examples/jobdispatch", "examples/testify"} {
		if !strings.Contains(text, "ok  \tgithub.com/multikueue-testkit/testkit/"+pkg) {
			t.Errorf("%s did not pass on the attached clusters:\n%s", pkg, text)
		}
	}
	t.Logf("examples on attached clusters:\n%s", text)
}
