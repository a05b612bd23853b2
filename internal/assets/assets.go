// Package assets finds, or builds, the kube-apiserver and etcd binaries that the
// local topology runs.
//
// The lookup order follows controller-runtime's envtest: the KUBEBUILDER_ASSETS
// environment variable first, then a per-user cache directory, and only then a
// build from the Go module proxy (the one network this project can rely on).
// A build writes its result into the cache, so it happens once per machine.
package assets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// EnvAssets is the environment variable envtest uses for a directory holding
// kube-apiserver and etcd. It wins over everything else.
const EnvAssets = "KUBEBUILDER_ASSETS"

// EnvCacheDir overrides the cache directory.
const EnvCacheDir = "MKTK_ASSETS_DIR"

// Default versions. kube-apiserver matches the Kubernetes minor that Kueue
// v0.17.0 is built against; etcd matches what that Kubernetes release pins.
const (
	DefaultKubernetesVersion = "v1.35.4"
	DefaultEtcdVersion       = "v3.6.5"
)

// Binaries are absolute paths to the control-plane binaries.
type Binaries struct {
	APIServer string
	Etcd      string
	// Source says where they came from: "env", "cache" or "build".
	Source string
}

// Options select versions and where to cache builds. The zero value is usable.
type Options struct {
	// KubernetesVersion of kube-apiserver, for example "v1.35.4".
	KubernetesVersion string
	// EtcdVersion of etcd, for example "v3.6.5".
	EtcdVersion string
	// CacheDir holds built binaries. Default: $MKTK_ASSETS_DIR, else
	// <user cache dir>/multikueue-testkit/assets.
	CacheDir string
	// NoBuild forbids building; a missing binary is then an error.
	NoBuild bool
	// Progress receives one line per build step. Nil discards.
	Progress io.Writer
	// GoBinary is the go command used for builds. Default: "go" from PATH.
	GoBinary string
	// Getenv reads the environment; nil means os.Getenv. Tests replace it.
	Getenv func(string) string
}

func (o Options) withDefaults() (Options, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = DefaultKubernetesVersion
	}
	if o.EtcdVersion == "" {
		o.EtcdVersion = DefaultEtcdVersion
	}
	if o.CacheDir == "" {
		o.CacheDir = o.Getenv(EnvCacheDir)
	}
	if o.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return o, fmt.Errorf("assets: no cache directory (set %s or %s): %w", EnvAssets, EnvCacheDir, err)
		}
		o.CacheDir = filepath.Join(base, "multikueue-testkit", "assets")
	}
	if o.GoBinary == "" {
		o.GoBinary = "go"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o, nil
}

// versionDir is the cache directory for one version pair.
func (o Options) versionDir() string {
	return filepath.Join(o.CacheDir, fmt.Sprintf("kube-apiserver-%s_etcd-%s", o.KubernetesVersion, o.EtcdVersion))
}

// ErrNotFound is wrapped by Ensure's error when the binaries are missing and
// could not be built.
var ErrNotFound = errors.New("control-plane binaries not found")

// Ensure returns usable binaries, building them if needed.
func Ensure(ctx context.Context, opts Options) (Binaries, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Binaries{}, err
	}
	if dir := o.Getenv(EnvAssets); dir != "" {
		b, err := inDir(dir, "env")
		if err != nil {
			return Binaries{}, fmt.Errorf("%w: %s=%q: %v", ErrNotFound, EnvAssets, dir, err)
		}
		return b, nil
	}
	if b, err := inDir(o.versionDir(), "cache"); err == nil {
		return b, nil
	}
	if o.NoBuild {
		return Binaries{}, fmt.Errorf("%w in %s and building is disabled; %s", ErrNotFound, o.versionDir(), hint())
	}
	return build(ctx, o)
}

func hint() string {
	return fmt.Sprintf("set %s to a directory holding kube-apiserver and etcd "+
		"(for example the output of `setup-envtest use -p path 1.35.x`), "+
		"or run `go run github.com/multikueue-testkit/testkit/cmd/mktk assets` on a machine that reaches the Go module proxy",
		EnvAssets)
}

func inDir(dir string, source string) (Binaries, error) {
	b := Binaries{
		APIServer: filepath.Join(dir, "kube-apiserver"),
		Etcd:      filepath.Join(dir, "etcd"),
		Source:    source,
	}
	for _, p := range []string{b.APIServer, b.Etcd} {
		if err := executable(p); err != nil {
			return Binaries{}, err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Binaries{}, err
	}
	b.APIServer = filepath.Join(abs, "kube-apiserver")
	b.Etcd = filepath.Join(abs, "etcd")
	return b, nil
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// lockDir takes an exclusive advisory lock so that parallel test binaries do
// not build the same thing twice. The returned func releases it.
func lockDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
