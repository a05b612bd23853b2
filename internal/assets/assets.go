// Package assets finds, or builds, the kube-apiserver, etcd and
// kube-controller-manager binaries that the local topology runs.
//
// The lookup order follows controller-runtime's envtest: the KUBEBUILDER_ASSETS
// environment variable first, then a per-user cache directory, and only then a
// build from the Go module proxy (the one network this project can rely on).
// A build writes its result into the cache, so it happens once per machine.
// envtest's asset directories have no kube-controller-manager: it is then
// looked up in the cache and built from the same module as kube-apiserver.
package assets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// EnvAssets is the environment variable envtest uses for a directory holding
// kube-apiserver and etcd. It wins over everything else.
const EnvAssets = "KUBEBUILDER_ASSETS"

// EnvCacheDir overrides the cache directory.
const EnvCacheDir = "MKTK_ASSETS_DIR"

// Default versions: Kubernetes v1.35.4, the minor the in-process Kueue
// (v0.17.0, still the default) is built against, and the etcd that release
// pins. v1.36.3 (etcd v3.6.8) is what Kueue v0.19 is built against, and
// works with the Kueue binary; with the in-process v0.17.0 a full run of
// the suite on it showed update conflicts that v1.35.4 never did, so it
// becomes the default together with the Kueue binary.
const (
	DefaultKubernetesVersion = "v1.36.3"
	DefaultEtcdVersion       = "v3.6.8"
)

// Binaries are absolute paths to the control-plane binaries.
type Binaries struct {
	APIServer string
	Etcd      string
	// ControllerManager is kube-controller-manager, of the same version as
	// APIServer.
	ControllerManager string
	// Source says where kube-apiserver and etcd came from: "env", "cache"
	// or "build".
	Source string
}

// Options select versions and where to cache builds. The zero value is usable.
type Options struct {
	// KubernetesVersion of kube-apiserver, for example "v1.36.3".
	KubernetesVersion string
	// EtcdVersion of etcd, for example "v3.6.8".
	EtcdVersion string
	// CacheDir holds built binaries. Default: $MKTK_ASSETS_DIR, else
	// <user cache dir>/multikueue-testkit/assets.
	CacheDir string
	// NoBuild forbids building; a missing binary is then an error.
	NoBuild bool
	// ControlPlaneOnly asks for kube-apiserver and etcd alone, what
	// envtest's KUBEBUILDER_ASSETS holds: kube-controller-manager is neither
	// looked for nor built, and Binaries.ControllerManager stays empty.
	ControlPlaneOnly bool
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

// Ensure returns usable binaries, building what is missing.
//
// kube-apiserver and etcd come from $KUBEBUILDER_ASSETS (an error if it
// lacks them), else the cache, else a build. kube-controller-manager comes
// from $MKTK_KUBE_CONTROLLER_MANAGER, $KUBEBUILDER_ASSETS, the cache, else a
// build into the cache, also when $KUBEBUILDER_ASSETS supplied the others.
func Ensure(ctx context.Context, opts Options) (Binaries, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Binaries{}, err
	}
	var b Binaries
	if dir := o.Getenv(EnvAssets); dir != "" {
		if b, err = inDir(dir, "env"); err != nil {
			return Binaries{}, fmt.Errorf("%w: %s=%q: %v", ErrNotFound, EnvAssets, dir, err)
		}
	} else if cached, err := inDir(o.versionDir(), "cache"); err == nil {
		b = cached
	}
	if !o.ControlPlaneOnly {
		if b.ControllerManager, err = findControllerManager(o); err != nil {
			return Binaries{}, err
		}
	}
	if b.APIServer != "" && (b.ControllerManager != "" || o.ControlPlaneOnly) {
		return b, nil
	}
	if o.NoBuild {
		missing := o.versionDir()
		if b.APIServer != "" {
			missing = filepath.Join(o.controllerManagerDir(), controllerManagerName)
		}
		return Binaries{}, fmt.Errorf("%w in %s and building is disabled; %s", ErrNotFound, missing, hint())
	}
	return build(ctx, o, b)
}

func hint() string {
	return fmt.Sprintf("set %s to a directory holding kube-apiserver and etcd "+
		"(for example the output of `setup-envtest use -p path 1.36.x`) and %s to a kube-controller-manager, "+
		"or run `go run github.com/multikueue-testkit/testkit/cmd/mktk assets` on a machine that reaches the Go module proxy",
		EnvAssets, EnvControllerManager)
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

// LockDir takes an exclusive advisory lock so that parallel test binaries do
// not build the same thing twice, waiting for it as long as ctx allows (a
// test binary waiting for another's build must be able to give up before go
// test kills it). The returned func releases it.
func LockDir(ctx context.Context, dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another process's build in %s: %w", dir, context.Cause(ctx))
		case <-tick.C:
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
