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

// EnvScheduler names a prebuilt kube-scheduler binary; it wins over
// $KUBEBUILDER_ASSETS and the cache.
const EnvScheduler = "MKTK_KUBE_SCHEDULER"

// ControllerManagerPackage and SchedulerPackage are the main packages of
// kube-controller-manager and kube-scheduler, built from the same throwaway
// module as kube-apiserver.
const (
	ControllerManagerPackage = "k8s.io/kubernetes/cmd/kube-controller-manager"
	SchedulerPackage         = "k8s.io/kubernetes/cmd/kube-scheduler"
)

// controllerManagerName is the binary's file name, in $KUBEBUILDER_ASSETS
// (envtest's directories do not have it) and in the cache.
const controllerManagerName = "kube-controller-manager"

// kubeComponent is a binary of k8s.io/kubernetes besides kube-apiserver,
// cached per Kubernetes version in a directory of its own (a cache made
// before it was needed stays valid).
type kubeComponent struct {
	// name is the binary's file name.
	name string
	// pkg is its main package; env names a prebuilt binary.
	pkg, env string
	// cost is what the progress output says a build costs.
	cost string
}

func controllerManager() kubeComponent {
	return kubeComponent{name: controllerManagerName, pkg: ControllerManagerPackage, env: EnvControllerManager,
		// Measured on the 2-core CI machine.
		cost: "this takes a few minutes on 2 cores, less once kube-apiserver was built with a warm build cache"}
}

func scheduler() kubeComponent {
	return kubeComponent{name: "kube-scheduler", pkg: SchedulerPackage, env: EnvScheduler,
		cost: "this takes a few minutes on 2 cores, less once kube-apiserver was built with a warm build cache"}
}

// componentDir is the cache directory of one version of c.
func (o Options) componentDir(c kubeComponent) string {
	return filepath.Join(o.CacheDir, c.name+"-"+o.KubernetesVersion)
}

func (o Options) controllerManagerDir() string { return o.componentDir(controllerManager()) }

// findComponent returns a usable binary of c: $<c.env> (an error if it is
// not executable), then $KUBEBUILDER_ASSETS/<c.name>, then the cache; ""
// when there is none, which a build must fill.
func findComponent(o Options, c kubeComponent) (string, error) {
	if p := o.Getenv(c.env); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%w: %s=%q: %v", ErrNotFound, c.env, p, err)
		}
		return filepath.Abs(p)
	}
	if dir := o.Getenv(EnvAssets); dir != "" {
		if p := filepath.Join(dir, c.name); executable(p) == nil {
			return filepath.Abs(p)
		}
	}
	if p := filepath.Join(o.componentDir(c), c.name); executable(p) == nil {
		return p, nil
	}
	return "", nil
}

func findControllerManager(o Options) (string, error) { return findComponent(o, controllerManager()) }

// buildComponent builds c in the prepared Kubernetes module at modDir (see
// prepareKubeModule) into the cache, saying so on o.Progress.
func buildComponent(ctx context.Context, o Options, c kubeComponent, modDir string) (string, error) {
	dest := o.componentDir(c)
	fmt.Fprintf(o.Progress, "multikueue-testkit: building %s %s from Go modules into %s\n", c.name, o.KubernetesVersion, dest)
	fmt.Fprintf(o.Progress, "multikueue-testkit: %s; later runs reuse the cache (set %s to skip this)\n", c.cost, c.env)
	staging := dest + ".partial"
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(staging)
	ld, err := VersionLDFlags(o.KubernetesVersion)
	if err != nil {
		return "", err
	}
	step(o, "go build %s (after kube-apiserver, most packages are cached)", c.pkg)
	out := filepath.Join(staging, c.name)
	if _, err := goCmd(ctx, o, modDir, "build", "-trimpath", "-ldflags", ld, "-o", out, c.pkg); err != nil {
		return "", fmt.Errorf("%w: building %s %s failed: %v; %s", ErrNotFound, c.name, o.KubernetesVersion, err, hint())
	}
	if err := os.RemoveAll(dest); err != nil {
		return "", err
	}
	if err := os.Rename(staging, dest); err != nil {
		return "", err
	}
	fmt.Fprintf(o.Progress, "multikueue-testkit: %s ready in %s\n", c.name, dest)
	return filepath.Join(dest, c.name), nil
}

// EnsureScheduler returns a usable kube-scheduler of the Kubernetes
// version: $MKTK_KUBE_SCHEDULER, $KUBEBUILDER_ASSETS/kube-scheduler, the
// cache, else a build into the cache (under the cache's lock). Only
// topologies with nodes need it, so Ensure does not build it.
func EnsureScheduler(ctx context.Context, opts Options) (string, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return "", err
	}
	c := scheduler()
	if p, err := findComponent(o, c); err != nil || p != "" {
		return p, err
	}
	if o.NoBuild {
		return "", fmt.Errorf("%w: no %s in %s and building is disabled; set %s", ErrNotFound, c.name, o.componentDir(c), c.env)
	}
	unlock, err := LockDir(ctx, o.CacheDir)
	if err != nil {
		return "", fmt.Errorf("assets: lock %s: %w", o.CacheDir, err)
	}
	defer unlock()
	if p, err := findComponent(o, c); err != nil || p != "" {
		return p, err
	}
	work, err := os.MkdirTemp("", "mktk-scheduler-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	kubeMod := filepath.Join(work, "kubernetes")
	if err := prepareKubeModule(ctx, o, kubeMod); err != nil {
		return "", fmt.Errorf("%w: preparing the k8s.io/kubernetes %s module failed: %v; %s", ErrNotFound, o.KubernetesVersion, err, hint())
	}
	return buildComponent(ctx, o, c, kubeMod)
}
