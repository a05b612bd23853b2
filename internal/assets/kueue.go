package assets

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Where the Kueue binary comes from, in this order: a prebuilt binary
// ($MKTK_KUEUE_BINARY or KueueOptions.Binary), a checkout built on the spot
// ($MKTK_KUEUE_SOURCE or KueueOptions.Source), else the version
// ($MKTK_KUEUE_VERSION, KueueOptions.Version, DefaultKueueVersion) from the
// cache or built from the Go module proxy into it.
const (
	EnvKueueBinary  = "MKTK_KUEUE_BINARY"
	EnvKueueSource  = "MKTK_KUEUE_SOURCE"
	EnvKueueVersion = "MKTK_KUEUE_VERSION"
)

// DefaultKueueVersion is the newest Kueue the module proxy serves.
const DefaultKueueVersion = "v0.19.2"

// KueueModule and KueuePackage are what a version build compiles.
const (
	KueueModule  = "sigs.k8s.io/kueue"
	KueuePackage = "sigs.k8s.io/kueue/cmd/kueue"
)

// KueueOptions choose the Kueue under test. Fields win over the
// environment; at most one of Binary and Source may be set (by field or
// variable).
type KueueOptions struct {
	// Version of sigs.k8s.io/kueue to build, e.g. "v0.18.4". With Binary,
	// it names the version the binary is (when its build info cannot tell),
	// whose chart and CRDs go with it.
	Version string
	// Source is a Kueue checkout (a directory holding Kueue's go.mod) to
	// build cmd/kueue from.
	Source string
	// Binary is a prebuilt kueue binary.
	Binary string
}

// Kueue is the Kueue binary to run and what it is.
type Kueue struct {
	// Path of the binary.
	Path string
	// Version is the Kueue release it is ("v0.19.2"), or for a checkout
	// the version the checkout says it is (its Version field, else
	// "v0.0.0-checkout").
	Version string
	// SourceDir is the Kueue source tree it was built from (the module
	// cache directory of Version, or the checkout); charts/kueue and
	// config/components/crd are read from it. For a prebuilt binary it is
	// the module source of Version.
	SourceDir string
	// From says where it came from: "binary", "checkout", "cache" or
	// "build".
	From string
	// Patched lists what the build changed in Kueue (empty for a prebuilt
	// binary, which may or may not have it): see KueuePatches.
	Patched []string
}

// KueuePatches are the changes a build makes to Kueue so that several
// Kueue processes run side by side on one machine, without root, each
// writing only below its own working directory: two absolute paths become
// relative ones. Kueue hard-codes both; nothing else is changed.
//
//   - pkg/visibility: the visibility server's certificate directory
//     certDir = "/visibility" becomes "visibility-certs" (a package
//     variable, set with the linker's -X);
//   - cmd/kueue/main.go: the metrics server's certificate directory
//     "/etc/kueue/metrics/certs", read when internal certificate management
//     is off, becomes "metrics-certs" (a string in main). A checkout is
//     built with a `go build -overlay` copy of its main.go; a release, whose
//     files in the module cache the go command will not overlay, from a
//     copy of its cmd/kueue in the throwaway module. Either copy is made at
//     build time from the very file being built.
var KueuePatches = []string{
	`pkg/visibility certDir "/visibility" -> "visibility-certs" (-ldflags -X)`,
	`cmd/kueue/main.go "/etc/kueue/metrics/certs" -> "metrics-certs" (patched copy of main.go)`,
}

// Relative directories the patched Kueue reads its certificates from, below
// its working directory.
const (
	KueueVisibilityCertDir = "visibility-certs"
	KueueMetricsCertDir    = "metrics-certs"
)

const (
	kueueMetricsCertLiteral = `"/etc/kueue/metrics/certs"`
	// kueueBuildScheme names the patch set; a change to the patches or the
	// flags changes the cache directory, so that no stale build is reused.
	kueueBuildScheme = "mktk1"
	kueueBinaryName  = "kueue"
)

var kueueVersionRE = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// resolve applies the environment and checks the choice.
func (k KueueOptions) resolve(getenv func(string) string) (KueueOptions, error) {
	if k.Binary == "" && k.Source == "" {
		k.Binary = getenv(EnvKueueBinary)
		k.Source = getenv(EnvKueueSource)
	}
	if k.Version == "" {
		k.Version = getenv(EnvKueueVersion)
	}
	if k.Binary != "" && k.Source != "" {
		return k, fmt.Errorf("assets: Kueue: Binary (%s) and Source (%s) are both set; choose one", k.Binary, k.Source)
	}
	if k.Version != "" && !kueueVersionRE.MatchString(k.Version) {
		return k, fmt.Errorf("assets: Kueue: Version %q is not a version like v0.19.2", k.Version)
	}
	return k, nil
}

// kueueDir is the cache directory of one Kueue version's build.
func (o Options) kueueDir(version string) string {
	return filepath.Join(o.CacheDir, fmt.Sprintf("kueue-%s-%s", version, kueueBuildScheme))
}

// EnsureKueue returns the Kueue binary that k chooses, building it when it
// is neither given nor cached. A version build takes about five minutes
// cold on 2 cores; a checkout is built every time (Go's build cache makes a
// second build of an unchanged tree a matter of seconds).
func EnsureKueue(ctx context.Context, opts Options, k KueueOptions) (Kueue, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Kueue{}, err
	}
	if k, err = k.resolve(o.Getenv); err != nil {
		return Kueue{}, err
	}
	switch {
	case k.Binary != "":
		return prebuiltKueue(ctx, o, k)
	case k.Source != "":
		return buildKueueCheckout(ctx, o, k)
	}
	version := k.Version
	if version == "" {
		version = DefaultKueueVersion
	}
	dir := o.kueueDir(version)
	srcDir, err := moduleDir(ctx, o, KueueModule, version)
	if err != nil {
		return Kueue{}, fmt.Errorf("%w: Kueue %s: %v", ErrNotFound, version, err)
	}
	cached := Kueue{Path: filepath.Join(dir, kueueBinaryName), Version: version, SourceDir: srcDir, From: "cache", Patched: KueuePatches}
	if executable(cached.Path) == nil {
		return cached, nil
	}
	if o.NoBuild {
		return Kueue{}, fmt.Errorf("%w: no Kueue %s in %s and building is disabled; set %s to a kueue binary", ErrNotFound, version, dir, EnvKueueBinary)
	}
	unlock, err := LockDir(ctx, o.CacheDir)
	if err != nil {
		return Kueue{}, err
	}
	defer unlock()
	if executable(cached.Path) == nil { // built by another process meanwhile
		return cached, nil
	}
	if err := buildKueueVersion(ctx, o, version, srcDir, dir); err != nil {
		return Kueue{}, fmt.Errorf("%w: building Kueue %s failed: %v", ErrNotFound, version, err)
	}
	cached.From = "build"
	return cached, nil
}

// moduleDir is the module cache directory of path@version, downloaded when
// missing.
func moduleDir(ctx context.Context, o Options, path, version string) (string, error) {
	tmp, err := os.MkdirTemp("", "mktk-modfetch-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	raw, err := goCmd(ctx, o, tmp, "mod", "download", "-json", path+"@"+version)
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(raw, &info); jerr == nil && info.Error != "" {
		return "", errors.New(info.Error)
	}
	if err != nil {
		return "", err
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s gave no directory", path, version)
	}
	return info.Dir, nil
}

// buildKueueVersion builds cmd/kueue of the released version in a
// throwaway module that requires only Kueue, so that every dependency is
// at the version Kueue's own go.mod names (as `go install ...@version`
// would build it), into dest.
func buildKueueVersion(ctx context.Context, o Options, version, srcDir, dest string) error {
	work, err := os.MkdirTemp("", "mktk-kueue-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	fmt.Fprintf(o.Progress, "multikueue-testkit: building Kueue %s (%s) from Go modules into %s\n", version, KueuePackage, dest)
	fmt.Fprintf(o.Progress, "multikueue-testkit: a cold build takes about 5 minutes on 2 cores; later runs reuse the cache (set %s to skip this)\n", EnvKueueBinary)
	gomod := fmt.Sprintf("module mktk/kueue\n\ngo 1.25.0\n\nrequire %s %s\n", KueueModule, version)
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	// The go command refuses an overlay of a file in the module cache, so
	// Kueue's main package is built from a patched copy in the throwaway
	// module: cmd/kueue imports only Kueue's public packages, which come
	// from the module at the version.
	if err := copyKueueMain(srcDir, filepath.Join(work, "cmd", "kueue")); err != nil {
		return err
	}
	step(o, "go mod tidy for Kueue %s", version)
	if _, err := goCmd(ctx, o, work, "mod", "tidy"); err != nil {
		return err
	}
	return goBuildKueue(ctx, o, work, "./cmd/kueue", "", version, "", dest)
}

// copyKueueMain copies the Go files of srcDir/cmd/kueue, tests left out,
// into dir with the KueuePatches made.
func copyKueueMain(srcDir, dir string) error {
	from := filepath.Join(srcDir, "cmd", "kueue")
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), []byte(patchKueueMain(string(src))), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// patchKueueMain makes the metrics certificate directory relative.
func patchKueueMain(src string) string {
	return strings.ReplaceAll(src, kueueMetricsCertLiteral, fmt.Sprintf("%q", KueueMetricsCertDir))
}

// buildKueueCheckout builds cmd/kueue in the checkout k.Source.
func buildKueueCheckout(ctx context.Context, o Options, k KueueOptions) (Kueue, error) {
	src, err := filepath.Abs(k.Source)
	if err != nil {
		return Kueue{}, err
	}
	mod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return Kueue{}, fmt.Errorf("assets: Kueue Source %s: %w", src, err)
	}
	if !regexp.MustCompile(`(?m)^module\s+` + regexp.QuoteMeta(KueueModule) + `\s*$`).Match(mod) {
		return Kueue{}, fmt.Errorf("assets: Kueue Source %s: its go.mod is not module %s", src, KueueModule)
	}
	version := k.Version
	if version == "" {
		version = "v0.0.0-checkout"
	}
	// One slot for every checkout: each start builds anew anyway, and a
	// running Kueue keeps its binary when a later build replaces the
	// directory; a slot per checkout would pile up 100 MB binaries.
	dest := filepath.Join(o.CacheDir, "kueue-checkout-"+kueueBuildScheme)
	unlock, err := LockDir(ctx, o.CacheDir)
	if err != nil {
		return Kueue{}, err
	}
	defer unlock()
	fmt.Fprintf(o.Progress, "multikueue-testkit: building Kueue from the checkout %s into %s\n", src, dest)
	if err := goBuildKueue(ctx, o, src, "./cmd/kueue", src, version, gitCommit(ctx, src), dest); err != nil {
		return Kueue{}, fmt.Errorf("%w: building Kueue from %s failed: %v", ErrNotFound, src, err)
	}
	return Kueue{Path: filepath.Join(dest, kueueBinaryName), Version: version, SourceDir: src, From: "checkout", Patched: KueuePatches}, nil
}

// gitCommit is the checkout's HEAD, or "" when git cannot tell.
func gitCommit(ctx context.Context, dir string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// goBuildKueue runs go build for pkg in modDir into dest/kueue, with the
// KueuePatches applied to main.go of the checkout srcDir by an overlay
// ("" when the sources are patched already) (through a staging
// directory, so that an interrupted build leaves nothing that looks done).
func goBuildKueue(ctx context.Context, o Options, modDir, pkg, srcDir, version, commit, dest string) error {
	work, err := os.MkdirTemp("", "mktk-kueue-overlay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	args := []string{"build", "-trimpath"}
	if srcDir != "" {
		overlay, err := kueueOverlay(srcDir, work)
		if err != nil {
			return err
		}
		if overlay != "" {
			args = append(args, "-overlay", overlay)
		}
	}
	ld := []string{"-s", "-w",
		"-X", "sigs.k8s.io/kueue/pkg/visibility.certDir=" + KueueVisibilityCertDir,
		"-X", "sigs.k8s.io/kueue/pkg/version.GitVersion=" + version,
	}
	if commit != "" {
		ld = append(ld, "-X", "sigs.k8s.io/kueue/pkg/version.GitCommit="+commit)
	}
	staging := dest + ".partial"
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	args = append(args, "-ldflags", strings.Join(ld, " "), "-o", filepath.Join(staging, kueueBinaryName), pkg)
	step(o, "go build %s (Kueue %s)", pkg, version)
	if _, err := goCmd(ctx, o, modDir, args...); err != nil {
		return err
	}
	if err := os.RemoveAll(dest); err != nil {
		return err
	}
	if err := os.Rename(staging, dest); err != nil {
		return err
	}
	step(o, "Kueue %s ready in %s", version, dest)
	return nil
}

// kueueOverlay writes, in work, main.go of srcDir with the metrics
// certificate directory made relative and an overlay file that puts it in
// place of the original; it returns the overlay's path, or "" when main.go
// does not hard-code that directory (nothing to patch).
func kueueOverlay(srcDir, work string) (string, error) {
	orig := filepath.Join(srcDir, "cmd", "kueue", "main.go")
	src, err := os.ReadFile(orig)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", orig, err)
	}
	if !strings.Contains(string(src), kueueMetricsCertLiteral) {
		return "", nil
	}
	patched := patchKueueMain(string(src))
	p := filepath.Join(work, "main.go")
	if err := os.WriteFile(p, []byte(patched), 0o644); err != nil {
		return "", err
	}
	raw, err := json.Marshal(map[string]map[string]string{"Replace": {orig: p}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(work, "overlay.json")
	return overlay, os.WriteFile(overlay, raw, 0o644)
}

// prebuiltKueue takes the binary k.Binary; its version is k.Version, else
// what its build info says (the sigs.k8s.io/kueue module it was built
// from).
func prebuiltKueue(ctx context.Context, o Options, k KueueOptions) (Kueue, error) {
	p, err := filepath.Abs(k.Binary)
	if err != nil {
		return Kueue{}, err
	}
	if err := executable(p); err != nil {
		return Kueue{}, fmt.Errorf("%w: Kueue Binary: %v", ErrNotFound, err)
	}
	version := k.Version
	if version == "" {
		version = BinaryKueueVersion(p)
	}
	if version == "" {
		return Kueue{}, fmt.Errorf("assets: Kueue Binary %s: its build info names no Kueue release; set %s (or KueueOptions.Version) to the version it is, so that its chart and CRDs can be found", p, EnvKueueVersion)
	}
	src, err := moduleDir(ctx, o, KueueModule, version)
	if err != nil {
		return Kueue{}, fmt.Errorf("assets: Kueue Binary %s is version %s, whose sources (chart, CRDs) could not be fetched: %w", p, version, err)
	}
	return Kueue{Path: p, Version: version, SourceDir: src, From: "binary"}, nil
}

// BinaryKueueVersion reads the Kueue release a binary was built from its Go
// build info: the sigs.k8s.io/kueue module's version, when the binary was
// built as a module dependency or by `go install ...@version`; "" when it
// cannot tell (a checkout build says "(devel)").
func BinaryKueueVersion(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return ""
	}
	if bi.Main.Path == KueueModule && kueueVersionRE.MatchString(bi.Main.Version) {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == KueueModule && kueueVersionRE.MatchString(d.Version) {
			return d.Version
		}
	}
	return ""
}
