package local_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/internal/modsrc"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestKueueCheckoutRuns is what a Kueue maintainer does: a copy of Kueue's
// source (the default release's module source stands in for a checkout),
// changed visibly — a log line of cmd/kueue and a version string — and
// MKTK_KUEUE_SOURCE pointing at it. The topology must run that build: its
// clusters' Kueue logs carry the changed line and the version.
func TestKueueCheckoutRuns(t *testing.T) {
	ctx := context.Background()
	src, err := modsrc.DirAt(ctx, modsrc.Kueue, local.DefaultKueueVersion)
	if err != nil {
		t.Fatal(err)
	}
	checkout := filepath.Join(t.TempDir(), "kueue")
	if err := copyTree(src, checkout); err != nil {
		t.Fatal(err)
	}
	const marker = "Initializing (mktk checkout test)"
	main := filepath.Join(checkout, "cmd", "kueue", "main.go")
	raw, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"Initializing",`) {
		t.Fatalf("%s has no \"Initializing\" log line to change", main)
	}
	if err := os.WriteFile(main, []byte(strings.Replace(string(raw), `"Initializing",`, `"`+marker+`",`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(assets.EnvKueueSource, checkout)
	t.Setenv(assets.EnvKueueVersion, "v0.19.99-checkout")

	lp := local.NewProvider(local.Options{})
	topo, err := topology.New(ctx, lp, topology.Options{Workers: 1, Progress: os.Stderr, Connector: connect.KubeconfigSecret{}})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close(ctx)
	kueueLogsSay(t, lp, topo, marker, `"gitVersion":"v0.19.99-checkout"`)
	e, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	assert.For(t, e.Check).SetupActive(ctx)
}

// copyTree copies the regular files below src to dst, writable (the module
// cache's are read-only).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
