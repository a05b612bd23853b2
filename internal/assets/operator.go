package assets

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/modfile"
)

// Operator is a job operator's controller (JobSet, KubeRay, ...) as its
// binary, built from its Go module at the version the Kueue under test
// names in its go.mod, as Kueue's own e2e tests install it.
type Operator struct {
	// Name is the binary's name ("jobset").
	Name string
	// Module and Version are the Go module it was built from.
	Module, Version string
	// Path of the binary.
	Path string
	// SourceDir is the module's source (CRDs, webhook manifests, chart).
	SourceDir string
	// From is "cache" or "build".
	From string
}

// OperatorSpec says which operator to build: its module and main package,
// or a main of this library's (Main, Go source) built against the module,
// where the upstream main cannot run several times on one host.
type OperatorSpec struct {
	Name, Module, Package string
	Main                  string
}

//go:embed mains/training-operator.go.txt
var trainingOperatorMain string

// TrainingOperator is the Kubeflow training-operator's controllers and
// webhooks (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob) under a main
// of this library's (mains/training-operator.go.txt): upstream's
// cmd/training-operator.v1 serves on fixed ports and writes its webhook
// certificates to a fixed /tmp directory through a rotator that waits for a
// Secret volume.
func TrainingOperator() OperatorSpec {
	return OperatorSpec{Name: "training-operator", Module: "github.com/kubeflow/training-operator", Main: trainingOperatorMain}
}

//go:embed mains/mpi-operator.go.txt
var mpiOperatorMain string

// MPIOperator is the MPI operator's MPIJob controller (kubeflow.org/v2beta1)
// under a main of this library's (mains/mpi-operator.go.txt): upstream's
// cmd/mpi-operator serves its health check on the fixed port 8080 and exits
// when that is taken.
func MPIOperator() OperatorSpec {
	return OperatorSpec{Name: "mpi-operator", Module: "github.com/kubeflow/mpi-operator", Main: mpiOperatorMain}
}

//go:embed mains/appwrapper.go.txt
var appWrapperMain string

// AppWrapperOperator is the AppWrapper controller and webhooks under a main
// of this library's (mains/appwrapper.go.txt): upstream's cmd serves
// webhooks on the fixed port 9443 through a cert rotator that waits for a
// Secret volume, and reads its configuration from a ConfigMap in its own
// namespace.
func AppWrapperOperator() OperatorSpec {
	return OperatorSpec{Name: "appwrapper", Module: "github.com/project-codeflare/appwrapper", Main: appWrapperMain}
}

// cacheName is the cache directory's name: name-version, and for a main of
// this library's a digest of its source, so that a changed main is rebuilt.
func (s OperatorSpec) cacheName(version string) string {
	if s.Main == "" {
		return s.Name + "-" + version
	}
	sum := sha256.Sum256([]byte(s.Main))
	return s.Name + "-" + version + "-" + hex.EncodeToString(sum[:4])
}

// Operators this library runs.
func JobSetOperator() OperatorSpec {
	return OperatorSpec{Name: "jobset", Module: "sigs.k8s.io/jobset", Package: "sigs.k8s.io/jobset"}
}

// LWSOperator is the LeaderWorkerSet controller (sigs.k8s.io/lws's
// cmd/main.go, configured by a file like JobSet's).
func LWSOperator() OperatorSpec {
	return OperatorSpec{Name: "lws", Module: "sigs.k8s.io/lws", Package: "sigs.k8s.io/lws/cmd"}
}

// TrainerOperator is the Kubeflow Trainer v2 controller manager
// (github.com/kubeflow/trainer/v2's cmd/trainer-controller-manager,
// configured by a file).
func TrainerOperator() OperatorSpec {
	return OperatorSpec{Name: "trainer", Module: "github.com/kubeflow/trainer/v2", Package: "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"}
}

// KubeRayOperator is KubeRay's ray-operator (its main.go at the module's
// root).
func KubeRayOperator() OperatorSpec {
	return OperatorSpec{Name: "kuberay-operator", Module: "github.com/ray-project/kuberay/ray-operator", Package: "github.com/ray-project/kuberay/ray-operator"}
}

// KWOKController is KWOK's controller (sigs.k8s.io/kwok/cmd/kwok), which
// keeps fake Nodes and moves their pods through Stages.
func KWOKController() OperatorSpec {
	return OperatorSpec{Name: "kwok", Module: "sigs.k8s.io/kwok", Package: "sigs.k8s.io/kwok/cmd/kwok"}
}

// RequiredVersion is the version of module that the Kueue source tree at
// k.SourceDir requires in its go.mod.
func (k Kueue) RequiredVersion(module string) (string, error) {
	path := filepath.Join(k.SourceDir, "go.mod")
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	f, err := modfile.ParseLax(path, raw, nil)
	if err != nil {
		return "", fmt.Errorf("assets: %s: %w", path, err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version, nil
		}
	}
	return "", fmt.Errorf("assets: Kueue %s (%s) does not require %s", k.Version, path, module)
}

// EnsureOperator returns the operator's binary at version from the cache,
// building it there from the Go module proxy when missing (a throwaway
// module that requires only the operator's module, so that its
// dependencies are those its go.mod names).
func EnsureOperator(ctx context.Context, opts Options, spec OperatorSpec, version string) (Operator, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Operator{}, err
	}
	src, err := moduleDir(ctx, o, spec.Module, version)
	if err != nil {
		return Operator{}, fmt.Errorf("%w: %s %s: %v", ErrNotFound, spec.Module, version, err)
	}
	dir := filepath.Join(o.CacheDir, spec.cacheName(version))
	op := Operator{Name: spec.Name, Module: spec.Module, Version: version, Path: filepath.Join(dir, spec.Name), SourceDir: src, From: "cache"}
	if executable(op.Path) == nil {
		return op, nil
	}
	if o.NoBuild {
		return Operator{}, fmt.Errorf("%w: no %s %s in %s and building is disabled", ErrNotFound, spec.Name, version, dir)
	}
	unlock, err := LockDir(ctx, o.CacheDir)
	if err != nil {
		return Operator{}, err
	}
	defer unlock()
	if executable(op.Path) == nil {
		return op, nil
	}
	work, err := os.MkdirTemp("", "mktk-"+spec.Name+"-build-")
	if err != nil {
		return Operator{}, err
	}
	defer os.RemoveAll(work)
	fmt.Fprintf(o.Progress, "multikueue-testkit: building %s %s (%s) from Go modules into %s\n", spec.Name, version, spec.Module, dir)
	gomod := fmt.Sprintf("module mktk/%s\n\ngo 1.25.0\n\nrequire %s %s\n", spec.Name, spec.Module, version)
	pkg := spec.Package
	if spec.Main != "" {
		pkg = "."
		err = writeModule(work, gomod)
		if err == nil {
			err = os.WriteFile(filepath.Join(work, "main.go"), []byte(spec.Main), 0o644)
		}
	} else {
		err = writeModule(work, gomod, spec.Package)
	}
	if err != nil {
		return Operator{}, err
	}
	step(o, "go mod tidy for %s %s", spec.Name, version)
	if _, err := goCmd(ctx, o, work, "mod", "tidy"); err != nil {
		return Operator{}, fmt.Errorf("%w: %s %s: %v", ErrNotFound, spec.Name, version, err)
	}
	staging := dir + ".partial"
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return Operator{}, err
	}
	defer os.RemoveAll(staging)
	step(o, "go build %s", spec.Name)
	if _, err := goCmd(ctx, o, work, "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(staging, spec.Name), pkg); err != nil {
		return Operator{}, fmt.Errorf("%w: building %s %s: %v", ErrNotFound, spec.Name, version, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return Operator{}, err
	}
	if err := os.Rename(staging, dir); err != nil {
		return Operator{}, err
	}
	op.From = "build"
	return op, nil
}

// ModuleDir is the source directory of module at version in the module
// cache, downloading it from the Go module proxy when missing.
func ModuleDir(ctx context.Context, opts Options, module, version string) (string, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return "", err
	}
	dir, err := moduleDir(ctx, o, module, version)
	if err != nil {
		return "", fmt.Errorf("%w: %s %s: %v", ErrNotFound, module, version, err)
	}
	return dir, nil
}

// CacheDir is where builds are kept, after the defaults ($MKTK_ASSETS_DIR,
// else the user cache directory).
func CacheDir(opts Options) (string, error) {
	o, err := opts.withDefaults()
	return o.CacheDir, err
}
