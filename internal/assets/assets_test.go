package assets

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func fakeBinaries(t *testing.T, dir string, names ...string) {
	t.Helper()
	if len(names) == 0 {
		names = []string{"kube-apiserver", "etcd"}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// cachedControllerManager puts a kube-controller-manager into o's cache.
func cachedControllerManager(t *testing.T, o Options) string {
	t.Helper()
	o, _ = o.withDefaults()
	fakeBinaries(t, o.controllerManagerDir(), controllerManagerName)
	return filepath.Join(o.controllerManagerDir(), controllerManagerName)
}

func TestEnvWins(t *testing.T) {
	dir := t.TempDir()
	fakeBinaries(t, dir, "kube-apiserver", "etcd", "kube-controller-manager")
	b, err := Ensure(context.Background(), Options{Getenv: env(map[string]string{EnvAssets: dir}), CacheDir: t.TempDir()})
	if err != nil || b.Source != "env" || b.APIServer != filepath.Join(dir, "kube-apiserver") ||
		b.ControllerManager != filepath.Join(dir, "kube-controller-manager") {
		t.Fatalf("got %+v, %v", b, err)
	}
}

// envtest's asset directories have no kube-controller-manager: it comes
// from the cache then.
func TestEnvWithoutControllerManagerTakesItFromTheCache(t *testing.T) {
	dir := t.TempDir()
	fakeBinaries(t, dir)
	o := Options{Getenv: env(map[string]string{EnvAssets: dir}), CacheDir: t.TempDir()}
	want := cachedControllerManager(t, o)
	b, err := Ensure(context.Background(), o)
	if err != nil || b.Source != "env" || b.APIServer != filepath.Join(dir, "kube-apiserver") || b.ControllerManager != want {
		t.Fatalf("got %+v, %v", b, err)
	}
}

func TestControllerManagerOverride(t *testing.T) {
	dir := t.TempDir()
	fakeBinaries(t, dir, "my-kcm")
	o := Options{Getenv: env(map[string]string{EnvControllerManager: filepath.Join(dir, "my-kcm")}), CacheDir: t.TempDir()}
	oo, _ := o.withDefaults()
	fakeBinaries(t, oo.versionDir())
	b, err := Ensure(context.Background(), o)
	if err != nil || b.ControllerManager != filepath.Join(dir, "my-kcm") {
		t.Fatalf("got %+v, %v", b, err)
	}
	o.Getenv = env(map[string]string{EnvControllerManager: filepath.Join(dir, "missing")})
	_, err = Ensure(context.Background(), o)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), EnvControllerManager) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("want an error naming %s and the path, got %v", EnvControllerManager, err)
	}
}

// fakeGo is a go command that "builds" by writing an executable at -o and
// answers `go mod download -json` with a go.mod that has staging replaces.
// Every invocation is appended to log.
func fakeGo(t *testing.T) (goBin, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "calls.log")
	gomod := filepath.Join(dir, "upstream.go.mod")
	if err := os.WriteFile(gomod, []byte("module k8s.io/kubernetes\n\nreplace k8s.io/api => ./staging/src/k8s.io/api\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
echo "$@" >> ` + log + `
case "$1 $2" in
"mod download") echo '{"GoMod": "` + gomod + `"}' ;;
"mod tidy") : ;;
build*)
  out=""; prev=""
  for a in "$@"; do if [ "$prev" = "-o" ]; then out="$a"; fi; prev="$a"; done
  printf '#!/bin/sh\n' > "$out"; chmod +x "$out" ;;
esac
`
	goBin = filepath.Join(dir, "go")
	if err := os.WriteFile(goBin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return goBin, log
}

// With kube-apiserver and etcd from $KUBEBUILDER_ASSETS, only
// kube-controller-manager is built, into the cache, with progress.
func TestControllerManagerIsBuiltEvenWithKubebuilderAssets(t *testing.T) {
	dir := t.TempDir()
	fakeBinaries(t, dir)
	goBin, calls := fakeGo(t)
	var progress strings.Builder
	o := Options{Getenv: env(map[string]string{EnvAssets: dir}), CacheDir: t.TempDir(), GoBinary: goBin, Progress: &progress}
	b, err := Ensure(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	oo, _ := o.withDefaults()
	if b.Source != "env" || b.ControllerManager != filepath.Join(oo.controllerManagerDir(), controllerManagerName) {
		t.Fatalf("got %+v", b)
	}
	log, _ := os.ReadFile(calls)
	if strings.Contains(string(log), APIServerPackage) || strings.Contains(string(log), "etcd") {
		t.Errorf("kube-apiserver or etcd was built although $KUBEBUILDER_ASSETS has them:\n%s", log)
	}
	if !strings.Contains(string(log), "build -trimpath -ldflags") || !strings.Contains(string(log), ControllerManagerPackage) {
		t.Errorf("kube-controller-manager not built with the version ldflags:\n%s", log)
	}
	if !strings.Contains(progress.String(), "building kube-controller-manager "+DefaultKubernetesVersion) {
		t.Errorf("no progress line for the build:\n%s", progress.String())
	}
	t.Log(progress.String())
	// The second time, the cache answers.
	progress.Reset()
	if b2, err := Ensure(context.Background(), o); err != nil || b2.ControllerManager != b.ControllerManager || progress.Len() != 0 {
		t.Errorf("second Ensure: %+v, %v, progress %q", b2, err, progress.String())
	}
}

func TestColdBuildMakesAllThree(t *testing.T) {
	goBin, calls := fakeGo(t)
	o := Options{Getenv: env(nil), CacheDir: t.TempDir(), GoBinary: goBin}
	b, err := Ensure(context.Background(), o)
	if err != nil || b.Source != "build" || b.APIServer == "" || b.Etcd == "" || b.ControllerManager == "" {
		t.Fatalf("got %+v, %v", b, err)
	}
	log, _ := os.ReadFile(calls)
	if n := strings.Count(string(log), "mod download"); n != 1 {
		t.Errorf("k8s.io/kubernetes resolved %d times, want once (one module for both binaries):\n%s", n, log)
	}
}

func TestNoBuildNamesTheMissingControllerManager(t *testing.T) {
	dir := t.TempDir()
	fakeBinaries(t, dir)
	_, err := Ensure(context.Background(), Options{Getenv: env(map[string]string{EnvAssets: dir}), CacheDir: t.TempDir(), NoBuild: true})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "kube-controller-manager") || !strings.Contains(err.Error(), EnvControllerManager) {
		t.Fatalf("want an error naming kube-controller-manager and %s, got %v", EnvControllerManager, err)
	}
	t.Log(err)
}

func TestEnvPointingAtEmptyDirIsAnError(t *testing.T) {
	dir := t.TempDir()
	_, err := Ensure(context.Background(), Options{Getenv: env(map[string]string{EnvAssets: dir}), CacheDir: t.TempDir()})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), EnvAssets) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("want an error naming %s and %s, got %v", EnvAssets, dir, err)
	}
	t.Log(err)
}

func TestCacheIsUsed(t *testing.T) {
	o := Options{Getenv: env(nil), CacheDir: t.TempDir()}
	o, _ = o.withDefaults()
	if err := os.MkdirAll(o.versionDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	fakeBinaries(t, o.versionDir())
	cachedControllerManager(t, o)
	b, err := Ensure(context.Background(), o)
	if err != nil || b.Source != "cache" || b.ControllerManager == "" {
		t.Fatalf("got %+v, %v", b, err)
	}
}

func TestMissingBinaryWithNoWayToBuild(t *testing.T) {
	for name, o := range map[string]Options{
		"no go command":     {GoBinary: filepath.Join(t.TempDir(), "no-such-go")},
		"building disabled": {NoBuild: true},
	} {
		t.Run(name, func(t *testing.T) {
			o.Getenv, o.CacheDir = env(nil), t.TempDir()
			_, err := Ensure(context.Background(), o)
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("want ErrNotFound, got %v", err)
			}
			if !strings.Contains(err.Error(), EnvAssets) {
				t.Errorf("error does not say how to provide %s: %v", EnvAssets, err)
			}
			t.Log(err)
		})
	}
}

func TestAPIServerGoMod(t *testing.T) {
	upstream := []byte("module k8s.io/kubernetes\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n\tgithub.com/x/y => github.com/x/y v1.0.0\n)\n")
	got, err := APIServerGoMod("v1.35.4", upstream)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"require k8s.io/kubernetes v1.35.4", "replace k8s.io/api => k8s.io/api v0.35.4", "replace k8s.io/client-go => k8s.io/client-go v0.35.4"} {
		if !strings.Contains(got, want) {
			t.Errorf("go.mod lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "github.com/x/y") {
		t.Errorf("non-staging replace copied:\n%s", got)
	}
	if _, err := APIServerGoMod("1.35", upstream); err == nil || !strings.Contains(err.Error(), "KubernetesVersion") {
		t.Errorf("bad version accepted: %v", err)
	}
	ld, err := VersionLDFlags("v1.35.4")
	if err != nil || !strings.Contains(ld, "gitVersion=v1.35.4") || !strings.Contains(ld, "gitMinor=35") || !strings.Contains(ld, "gitMajor=1") {
		t.Errorf("ldflags %q %v", ld, err)
	}
}

// ControlPlaneOnly (mktk -envtest assets) builds kube-apiserver and etcd
// and never kube-controller-manager; with them cached it builds nothing.
func TestControlPlaneOnlyBuildsNoControllerManager(t *testing.T) {
	goBin, calls := fakeGo(t)
	o := Options{Getenv: env(nil), CacheDir: t.TempDir(), GoBinary: goBin, ControlPlaneOnly: true}
	b, err := Ensure(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if b.APIServer == "" || b.Etcd == "" || b.ControllerManager != "" {
		t.Fatalf("got %+v; want kube-apiserver and etcd only", b)
	}
	log, _ := os.ReadFile(calls)
	if strings.Contains(string(log), ControllerManagerPackage) {
		t.Errorf("kube-controller-manager was built for ControlPlaneOnly:\n%s", log)
	}
	if !strings.Contains(string(log), APIServerPackage) {
		t.Errorf("kube-apiserver was not built:\n%s", log)
	}
	o.NoBuild = true
	if b, err := Ensure(context.Background(), o); err != nil || b.Source != "cache" || b.ControllerManager != "" {
		t.Fatalf("second Ensure: %+v, %v; want the cached pair and no kube-controller-manager", b, err)
	}
}
