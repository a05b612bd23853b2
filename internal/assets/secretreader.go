package assets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
)

// EnvSecretReader names a prebuilt secretreader plugin binary; it wins over
// the cache and the build, like KUBEBUILDER_ASSETS for the control plane.
const EnvSecretReader = "MKTK_SECRETREADER_PLUGIN"

// SecretReaderPackage is the ClusterProfile credentials plugin of
// sigs.k8s.io/cluster-inventory-api that Kueue's own e2e tests use: it reads
// the token from Secret <namespace>/<clusterName> (key "token") of the
// cluster its KUBECONFIG names, clusterName coming from the ClusterProfile's
// client.authentication.k8s.io/exec extension.
const SecretReaderPackage = modsrc.ClusterInventory + "/plugins/secretreader/cmd/plugin"

// SecretReader returns the path of the secretreader plugin built from the
// cluster-inventory-api version this code links (the caller's module graph
// decides it, as for the CRDs), building it into the cache on first use.
//
// Lookup: $MKTK_SECRETREADER_PLUGIN, then
// <cache>/secretreader-plugin_<version>/secretreader-plugin, else a build
// under the cache lock. The build first tries `go build -mod=readonly` in the
// working directory, i.e. the caller's module, whose packages the test build
// has just compiled (measured: 4 s, link only); if that fails (no module
// there, vendoring) it builds in a throwaway module that requires only
// cluster-inventory-api (measured: 43 s with a warm build cache, 3 min cold
// on 2 cores; needs the Go module proxy).
func SecretReader(ctx context.Context, opts Options) (string, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return "", err
	}
	if p := o.Getenv(EnvSecretReader); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%w: %s=%q: %v", ErrNotFound, EnvSecretReader, p, err)
		}
		return filepath.Abs(p)
	}
	dir, err := modsrc.Dir(ctx, modsrc.ClusterInventory)
	if err != nil {
		return "", fmt.Errorf("assets: secretreader plugin: %w", err)
	}
	version := strings.TrimPrefix(filepath.Base(dir), "cluster-inventory-api@")
	if version == filepath.Base(dir) {
		// A local replace: its directory has no version; do not cache it
		// under a name another checkout could share.
		version = "local-" + strings.NewReplacer("/", "_", "\\", "_").Replace(strings.Trim(dir, "/"))
	}
	dest := filepath.Join(o.CacheDir, "secretreader-plugin_"+version, "secretreader-plugin")
	if executable(dest) == nil {
		return dest, nil
	}
	if o.NoBuild {
		return "", fmt.Errorf("%w: secretreader plugin not in %s and building is disabled; set %s to a binary built with `go build %s`",
			ErrNotFound, filepath.Dir(dest), EnvSecretReader, SecretReaderPackage)
	}
	unlock, err := LockDir(ctx, o.CacheDir)
	if err != nil {
		return "", fmt.Errorf("assets: lock %s: %w", o.CacheDir, err)
	}
	defer unlock()
	if executable(dest) == nil { // built by another process while we waited
		return dest, nil
	}
	if err := buildSecretReader(ctx, o, version, dest); err != nil {
		return "", fmt.Errorf("%w: building the secretreader plugin (%s@%s) failed: %v; set %s to a prebuilt binary",
			ErrNotFound, modsrc.ClusterInventory, version, err, EnvSecretReader)
	}
	return dest, nil
}

// buildSecretReader builds the plugin into dest through a staging file.
func buildSecretReader(ctx context.Context, o Options, version, dest string) error {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	staging := dest + ".partial"
	defer os.Remove(staging)
	step(o, "building the ClusterProfile secretreader plugin (%s@%s) into %s", modsrc.ClusterInventory, version, filepath.Dir(dest))
	// No -trimpath: the test build compiled these packages without it, so
	// only the link is left to do.
	args := []string{"build", "-mod=readonly", "-ldflags", "-s -w", "-o", staging, SecretReaderPackage}
	_, inModule := goCmd(ctx, o, "", args...) // "": the working directory
	if inModule != nil {
		step(o, "not buildable from the current module (%v); building in a throwaway module", firstLine(inModule))
		work, err := os.MkdirTemp("", "mktk-secretreader-build-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(work)
		gomod := fmt.Sprintf("module mktk/secretreader\n\ngo 1.25.0\n\nrequire %s %s\n", modsrc.ClusterInventory, version)
		if err := writeModule(work, gomod, SecretReaderPackage); err != nil {
			return err
		}
		if _, err := goCmd(ctx, o, work, "mod", "tidy"); err != nil {
			return err
		}
		if _, err := goCmd(ctx, o, work, "build", "-ldflags", "-s -w", "-o", staging, SecretReaderPackage); err != nil {
			return err
		}
	}
	if err := executable(staging); err != nil {
		return err
	}
	return os.Rename(staging, dest)
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
