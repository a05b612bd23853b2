package assets

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// build compiles what have lacks into the cache directory, under the cache
// lock: kube-apiserver and etcd (unless have.APIServer is set) and
// kube-controller-manager (unless have.ControllerManager or
// o.ControlPlaneOnly is set). The
// Kubernetes binaries share one throwaway module; etcd has its own, so that
// their dependency graphs never meet.
func build(ctx context.Context, o Options, have Binaries) (Binaries, error) {
	unlock, err := LockDir(ctx, o.CacheDir)
	if err != nil {
		return Binaries{}, fmt.Errorf("assets: lock %s: %w", o.CacheDir, err)
	}
	defer unlock()
	// Another process may have finished the build while we waited.
	b := have
	if b.APIServer == "" {
		if cached, err := inDir(o.versionDir(), "cache"); err == nil {
			b = cached
			b.ControllerManager = have.ControllerManager
		}
	}
	if b.ControllerManager == "" && !o.ControlPlaneOnly {
		if b.ControllerManager, err = findControllerManager(o); err != nil {
			return Binaries{}, err
		}
	}
	if b.APIServer != "" && (b.ControllerManager != "" || o.ControlPlaneOnly) {
		return b, nil
	}
	if _, err := exec.LookPath(o.GoBinary); err != nil {
		return Binaries{}, fmt.Errorf("%w: cannot build them without the go command (%v); %s", ErrNotFound, err, hint())
	}
	work, err := os.MkdirTemp("", "mktk-assets-build-")
	if err != nil {
		return Binaries{}, err
	}
	defer os.RemoveAll(work)
	kubeMod := filepath.Join(work, "kubernetes")
	if err := prepareKubeModule(ctx, o, kubeMod); err != nil {
		return Binaries{}, fmt.Errorf("%w: preparing the k8s.io/kubernetes %s module failed: %v; %s", ErrNotFound, o.KubernetesVersion, err, hint())
	}
	if b.APIServer == "" {
		built, err := buildControlPlane(ctx, o, kubeMod, filepath.Join(work, "etcd"))
		if err != nil {
			return Binaries{}, err
		}
		built.ControllerManager = b.ControllerManager
		b = built
	}
	if b.ControllerManager == "" && !o.ControlPlaneOnly {
		if b.ControllerManager, err = buildComponent(ctx, o, controllerManager(), kubeMod); err != nil {
			return Binaries{}, err
		}
	}
	return b, nil
}

// buildControlPlane builds kube-apiserver (in the prepared module kubeMod)
// and etcd (in a module of its own at etcdMod) into the cache.
func buildControlPlane(ctx context.Context, o Options, kubeMod, etcdMod string) (Binaries, error) {
	dest := o.versionDir()
	staging := filepath.Join(dest + ".partial")
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return Binaries{}, err
	}
	defer os.RemoveAll(staging)

	fmt.Fprintf(o.Progress, "multikueue-testkit: building kube-apiserver %s and etcd %s from Go modules into %s\n", o.KubernetesVersion, o.EtcdVersion, dest)
	fmt.Fprintf(o.Progress, "multikueue-testkit: a cold build takes 10-15 minutes on 2 cores; later runs reuse the cache (set %s to skip this)\n", EnvAssets)

	if err := buildAPIServer(ctx, o, kubeMod, filepath.Join(staging, "kube-apiserver")); err != nil {
		return Binaries{}, fmt.Errorf("%w: building kube-apiserver %s failed: %v; %s", ErrNotFound, o.KubernetesVersion, err, hint())
	}
	if err := buildEtcd(ctx, o, etcdMod, filepath.Join(staging, "etcd")); err != nil {
		return Binaries{}, fmt.Errorf("%w: building etcd %s failed: %v; %s", ErrNotFound, o.EtcdVersion, err, hint())
	}
	if err := os.RemoveAll(dest); err != nil {
		return Binaries{}, err
	}
	if err := os.Rename(staging, dest); err != nil {
		return Binaries{}, err
	}
	b, err := inDir(dest, "build")
	if err != nil {
		return Binaries{}, err
	}
	fmt.Fprintf(o.Progress, "multikueue-testkit: binaries ready in %s\n", dest)
	return b, nil
}

var semverRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)

// stagingReplaces reads k8s.io/kubernetes's go.mod and returns the staging
// modules it replaces with local directories; a consumer must replace each with
// the published v0.<minor>.<patch> module.
func stagingReplaces(goMod []byte) []string {
	var mods []string
	sc := bufio.NewScanner(bytes.NewReader(goMod))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "replace "))
		if len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "./staging/") {
			mods = append(mods, f[0])
		}
	}
	return mods
}

// APIServerGoMod renders the throwaway go.mod that builds kube-apiserver.
func APIServerGoMod(kubeVersion string, upstreamGoMod []byte) (string, error) {
	m := semverRE.FindStringSubmatch(kubeVersion)
	if m == nil {
		return "", fmt.Errorf("KubernetesVersion %q is not of the form v1.MINOR.PATCH", kubeVersion)
	}
	staging := stagingReplaces(upstreamGoMod)
	if len(staging) == 0 {
		return "", fmt.Errorf("k8s.io/kubernetes %s go.mod lists no staging replaces", kubeVersion)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "module mktk/apiserver\n\ngo 1.25.0\n\nrequire k8s.io/kubernetes %s\n\n", kubeVersion)
	for _, mod := range staging {
		fmt.Fprintf(&sb, "replace %s => %s v0.%s.%s\n", mod, mod, m[2], m[3])
	}
	return sb.String(), nil
}

// VersionLDFlags sets the version the API server reports. Without it the
// server says v0.0.0-master and Kueue refuses to start.
func VersionLDFlags(kubeVersion string) (string, error) {
	m := semverRE.FindStringSubmatch(kubeVersion)
	if m == nil {
		return "", fmt.Errorf("KubernetesVersion %q is not of the form v1.MINOR.PATCH", kubeVersion)
	}
	const pkg = "k8s.io/component-base/version"
	return strings.Join([]string{
		"-s", "-w",
		"-X", pkg + ".gitVersion=" + kubeVersion,
		"-X", pkg + ".gitMajor=" + m[1],
		"-X", pkg + ".gitMinor=" + m[2],
		"-X", pkg + ".gitTreeState=clean",
	}, " "), nil
}

// prepareKubeModule writes and tidies, in dir, the throwaway module that
// builds kube-apiserver and kube-controller-manager: k8s.io/kubernetes at the
// version, every staging module replaced by its published v0.MINOR.PATCH.
func prepareKubeModule(ctx context.Context, o Options, dir string) error {
	return prepareKubeModuleFor(ctx, o, dir, "kube-apiserver, kube-controller-manager and kube-scheduler", APIServerPackage, ControllerManagerPackage, SchedulerPackage)
}

// prepareKubeModuleFor is prepareKubeModule for the main packages pkgs
// (what names says in the progress output).
func prepareKubeModuleFor(ctx context.Context, o Options, dir, names string, pkgs ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	step(o, "resolving k8s.io/kubernetes %s", o.KubernetesVersion)
	raw, err := goCmd(ctx, o, dir, "mod", "download", "-json", "k8s.io/kubernetes@"+o.KubernetesVersion)
	if err != nil {
		return err
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal(raw, &info); err != nil {
		return fmt.Errorf("go mod download: %w", err)
	}
	if info.Error != "" {
		return fmt.Errorf("go mod download: %s", info.Error)
	}
	upstream, err := os.ReadFile(info.GoMod)
	if err != nil {
		return err
	}
	gomod, err := APIServerGoMod(o.KubernetesVersion, upstream)
	if err != nil {
		return err
	}
	if err := writeModule(dir, gomod, pkgs...); err != nil {
		return err
	}
	step(o, "go mod tidy for %s", names)
	_, err = goCmd(ctx, o, dir, "mod", "tidy")
	return err
}

// APIServerPackage is the kube-apiserver main package.
const APIServerPackage = "k8s.io/kubernetes/cmd/kube-apiserver"

// buildAPIServer builds kube-apiserver in the prepared module dir.
func buildAPIServer(ctx context.Context, o Options, dir, out string) error {
	ld, err := VersionLDFlags(o.KubernetesVersion)
	if err != nil {
		return err
	}
	step(o, "go build %s (the slow part)", APIServerPackage)
	_, err = goCmd(ctx, o, dir, "build", "-trimpath", "-ldflags", ld, "-o", out, APIServerPackage)
	return err
}

func buildEtcd(ctx context.Context, o Options, dir, out string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	gomod := fmt.Sprintf("module mktk/etcd\n\ngo 1.25.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n", o.EtcdVersion)
	if err := writeModule(dir, gomod, "go.etcd.io/etcd/server/v3"); err != nil {
		return err
	}
	step(o, "go mod tidy for etcd")
	if _, err := goCmd(ctx, o, dir, "mod", "tidy"); err != nil {
		return err
	}
	step(o, "go build go.etcd.io/etcd/server/v3")
	_, err := goCmd(ctx, o, dir, "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "go.etcd.io/etcd/server/v3")
	return err
}

// writeModule writes go.mod and a tools.go importing the main packages, so
// that `go mod tidy` keeps what they need.
func writeModule(dir, gomod string, mainPkgs ...string) error {
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	var sb strings.Builder
	sb.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, p := range mainPkgs {
		fmt.Fprintf(&sb, "\t_ %q\n", p)
	}
	sb.WriteString(")\n")
	return os.WriteFile(filepath.Join(dir, "tools.go"), []byte(sb.String()), 0o644)
}

func step(o Options, format string, args ...any) {
	fmt.Fprintf(o.Progress, "multikueue-testkit: [%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// goCmd runs the go command in dir with a clean module environment and returns
// stdout; on failure the error carries the tail of stderr.
func goCmd(ctx context.Context, o Options, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, o.GoBinary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GO111MODULE=on")
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		tail := stderr.String()
		if len(tail) > 2000 {
			tail = "..." + tail[len(tail)-2000:]
		}
		return nil, fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(tail))
	}
	return stdout.Bytes(), nil
}
