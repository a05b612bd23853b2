package install_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
	"github.com/multikueue-testkit/testkit/topology/install"
)

// TestRenderKueueFromOCIChart pushes the Kueue module's chart to a real OCI
// registry (distribution's, in memory, on loopback, the one Helm's own
// registry tests use) with Helm's registry client, as `helm push` does,
// and renders it by reference (KueueOptions.Chart "oci://…"): the manifest
// equals the one rendered from the module's chart directory, and the chart
// is the pushed one. A reference to a tag the registry does not have fails
// naming the reference.
func TestRenderKueueFromOCIChart(t *testing.T) {
	ctx := context.Background()
	cfg := &configuration.Configuration{Storage: configuration.Storage{"inmemory": configuration.Parameters{}}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	srv := httptest.NewServer(handlers.NewApp(ctx, cfg))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	root, err := modsrc.Dir(ctx, modsrc.Kueue)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(filepath.Join(root, "charts", "kueue"))
	if err != nil {
		t.Fatal(err)
	}
	tgz, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/charts/kueue:" + ch.Metadata.Version
	if _, err := rc.Push(data, ref); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}

	opts, _ := renderCase(t)
	fromDir, err := install.RenderKueue(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Chart, opts.ChartPlainHTTP = "oci://"+ref, true
	fromOCI, err := install.RenderKueue(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := "kueue-" + ch.Metadata.Version; fromOCI.Chart != want {
		t.Errorf("chart %q, want %q", fromOCI.Chart, want)
	}
	if fromOCI.Manifest != fromDir.Manifest {
		t.Errorf("the chart pulled from %s renders differently from the module's chart directory (%d bytes against %d)", ref, len(fromOCI.Manifest), len(fromDir.Manifest))
	}
	t.Logf("pushed and rendered %s (%d bytes of chart, %d of manifest)", ref, len(data), len(fromOCI.Manifest))

	opts.Chart = "oci://" + host + "/charts/kueue:0.0.0-absent"
	if _, err := install.RenderKueue(ctx, opts); err == nil || !strings.Contains(err.Error(), opts.Chart) {
		t.Errorf("a tag the registry does not have: %v; want an error naming %s", err, opts.Chart)
	}
}
