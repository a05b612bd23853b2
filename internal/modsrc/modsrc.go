// Package modsrc locates the source of pinned Go modules (Kueue, JobSet,
// KubeRay, cluster-inventory-api) in the module cache, so that CRDs and webhook
// manifests are read from the exact versions this binary links, never copied
// into this repository.
package modsrc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"unicode"
)

// Well-known module paths.
const (
	Kueue            = "sigs.k8s.io/kueue"
	JobSet           = "sigs.k8s.io/jobset"
	KubeRay          = "github.com/ray-project/kuberay/ray-operator"
	ClusterInventory = "sigs.k8s.io/cluster-inventory-api"
	TrainingOperator = "github.com/kubeflow/training-operator"
	MPIOperator      = "github.com/kubeflow/mpi-operator"
	AppWrapper       = "github.com/project-codeflare/appwrapper"
	LWS              = "sigs.k8s.io/lws"
	Trainer          = "github.com/kubeflow/trainer/v2"
)

// Version returns the version of module path linked into this binary.
func Version(path string) (string, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", fmt.Errorf("modsrc: no build info in this binary; cannot tell which %s is linked", path)
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				if d.Replace.Version == "" {
					// A local replace: the directory is the path itself.
					return "", fmt.Errorf("modsrc: %s is replaced by local directory %s; not supported", path, d.Replace.Path)
				}
				return d.Replace.Version, nil
			}
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("modsrc: %s is not a dependency of this binary", path)
}

// Dir returns the module cache directory of path at the linked version,
// downloading it with `go mod download` when it is not in the cache.
//
// The version comes from the binary's build info; test binaries carry none,
// so then `go list -m` in the working directory (the caller's module) answers.
func Dir(ctx context.Context, path string) (string, error) {
	v, err := Version(path)
	if err == nil {
		return DirAt(ctx, path, v)
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-json", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, lerr := cmd.Output()
	if lerr != nil {
		return "", fmt.Errorf("%v; and `go list -m %s` failed: %v: %s", err, path, lerr, strings.TrimSpace(stderr.String()))
	}
	var mod struct {
		Version, Dir string
		Replace      *struct{ Version, Dir string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("modsrc: go list -m %s: %w", path, err)
	}
	if mod.Replace != nil {
		mod.Version, mod.Dir = mod.Replace.Version, mod.Replace.Dir
	}
	if mod.Dir != "" {
		return mod.Dir, nil
	}
	return DirAt(ctx, path, mod.Version)
}

// DirAt is Dir for an explicit version.
func DirAt(ctx context.Context, path, version string) (string, error) {
	esc, err := escape(path)
	if err != nil {
		return "", err
	}
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		if out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output(); err == nil {
			cache = strings.TrimSpace(string(out))
		}
	}
	if cache != "" {
		dir := filepath.Join(cache, esc+"@"+version)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir, nil
		}
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("modsrc: go mod download %s@%s: %s", path, version, info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("modsrc: go mod download %s@%s: %v: %s", path, version, err, strings.TrimSpace(stderr.String()))
	}
	if info.Dir == "" {
		return "", fmt.Errorf("modsrc: go mod download %s@%s returned no directory", path, version)
	}
	return info.Dir, nil
}

// escape applies the module cache's case encoding: an upper-case letter
// becomes '!' followed by its lower-case form.
func escape(path string) (string, error) {
	var sb strings.Builder
	for _, r := range path {
		if r == '!' {
			return "", fmt.Errorf("modsrc: invalid module path %q", path)
		}
		if unicode.IsUpper(r) {
			sb.WriteByte('!')
			sb.WriteRune(unicode.ToLower(r))
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String(), nil
}
