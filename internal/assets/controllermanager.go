package assets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// EnvControllerManager names a prebuilt kube-controller-manager binary; it
// wins over $KUBEBUILDER_ASSETS and the cache.
const EnvControllerManager = "MKTK_KUBE_CONTROLLER_MANAGER"

// ControllerManagerPackage is the kube-controller-manager main package,
// built from the same throwaway module as kube-apiserver.
const ControllerManagerPackage = "k8s.io/kubernetes/cmd/kube-controller-manager"

// controllerManagerName is the binary's file name, in $KUBEBUILDER_ASSETS
// (envtest's directories do not have it) and in the cache.
const controllerManagerName = "kube-controller-manager"

// controllerManagerDir is the cache directory of one kube-controller-manager
// version. It is separate from kube-apiserver's and etcd's: a cache made
// before the controller-manager was needed stays valid.
func (o Options) controllerManagerDir() string {
	return filepath.Join(o.CacheDir, "kube-controller-manager-"+o.KubernetesVersion)
}

// findControllerManager returns a usable kube-controller-manager:
// $MKTK_KUBE_CONTROLLER_MANAGER (an error if it is not executable), then
// $KUBEBUILDER_ASSETS/kube-controller-manager, then the cache; "" when there
// is none, which a build must fill.
func findControllerManager(o Options) (string, error) {
	if p := o.Getenv(EnvControllerManager); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%w: %s=%q: %v", ErrNotFound, EnvControllerManager, p, err)
		}
		return filepath.Abs(p)
	}
	if dir := o.Getenv(EnvAssets); dir != "" {
		if p := filepath.Join(dir, controllerManagerName); executable(p) == nil {
			return filepath.Abs(p)
		}
	}
	if p := filepath.Join(o.controllerManagerDir(), controllerManagerName); executable(p) == nil {
		return p, nil
	}
	return "", nil
}

// buildControllerManager builds kube-controller-manager in the prepared
// Kubernetes module at modDir (see prepareKubeModule) into the cache.
func buildControllerManager(ctx context.Context, o Options, modDir string) (string, error) {
	dest := o.controllerManagerDir()
	staging := dest + ".partial"
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(staging)
	ld, err := VersionLDFlags(o.KubernetesVersion)
	if err != nil {
		return "", err
	}
	step(o, "go build %s (after kube-apiserver, most packages are cached)", ControllerManagerPackage)
	out := filepath.Join(staging, controllerManagerName)
	if _, err := goCmd(ctx, o, modDir, "build", "-trimpath", "-ldflags", ld, "-o", out, ControllerManagerPackage); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dest); err != nil {
		return "", err
	}
	if err := os.Rename(staging, dest); err != nil {
		return "", err
	}
	return filepath.Join(dest, controllerManagerName), nil
}

// controllerManagerBuildCost is what the progress output says a
// kube-controller-manager build costs (measured on the 2-core CI machine).
const controllerManagerBuildCost = "this takes a few minutes on 2 cores, less once kube-apiserver was built with a warm build cache"
