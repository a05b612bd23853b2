package assets

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKueueChoiceErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		k    KueueOptions
		env  map[string]string
		want string
	}{
		{KueueOptions{Binary: "/a", Source: "/b"}, nil, "Binary"},
		{KueueOptions{}, map[string]string{EnvKueueBinary: "/a", EnvKueueSource: "/b"}, "Source"},
		{KueueOptions{Version: "0.19.2"}, nil, "Version"},
		{KueueOptions{}, map[string]string{EnvKueueVersion: "latest"}, "Version"},
	} {
		_, err := tc.k.resolve(env(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v %v: got %v, want an error naming %s", tc.k, tc.env, err, tc.want)
		}
	}
	// Fields win over the environment.
	k, err := KueueOptions{Version: "v0.18.4"}.resolve(env(map[string]string{EnvKueueVersion: "v0.17.1"}))
	if err != nil || k.Version != "v0.18.4" {
		t.Errorf("got %+v, %v", k, err)
	}
}

func TestPrebuiltKueueMustBeExecutable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kueue")
	if err := os.WriteFile(p, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := EnsureKueue(context.Background(), Options{CacheDir: t.TempDir(), Getenv: env(nil)}, KueueOptions{Binary: p})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "Binary") {
		t.Fatalf("got %v", err)
	}
}

func TestPrebuiltKueueWithoutVersionSaysSo(t *testing.T) {
	// This test binary has no sigs.k8s.io/kueue in its build info.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if v := BinaryKueueVersion(self); v != "" {
		t.Fatalf("BinaryKueueVersion(test binary) = %q, want none", v)
	}
	_, err = EnsureKueue(context.Background(), Options{CacheDir: t.TempDir(), Getenv: env(nil)}, KueueOptions{Binary: self})
	if err == nil || !strings.Contains(err.Error(), EnvKueueVersion) {
		t.Fatalf("got %v, want an error asking for %s", err, EnvKueueVersion)
	}
}

func TestKueueOverlayMakesTheMetricsCertDirRelative(t *testing.T) {
	src := t.TempDir()
	main := filepath.Join(src, "cmd", "kueue", "main.go")
	if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "package main\n\nfunc main() {\n\tmetricsCertPath := \"/etc/kueue/metrics/certs\"\n\t_ = metricsCertPath\n}\n"
	if err := os.WriteFile(main, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	overlay, err := kueueOverlay(src, work)
	if err != nil || overlay == "" {
		t.Fatalf("overlay %q, %v", overlay, err)
	}
	raw, err := os.ReadFile(overlay)
	if err != nil {
		t.Fatal(err)
	}
	var o struct{ Replace map[string]string }
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	patched, err := os.ReadFile(o.Replace[main])
	if err != nil {
		t.Fatalf("overlay %s does not replace %s: %v", raw, main, err)
	}
	if strings.Contains(string(patched), "/etc/kueue") || !strings.Contains(string(patched), `"`+KueueMetricsCertDir+`"`) {
		t.Fatalf("patched main.go:\n%s", patched)
	}
	// A main.go without the path needs no overlay.
	if err := os.WriteFile(main, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if overlay, err := kueueOverlay(src, t.TempDir()); err != nil || overlay != "" {
		t.Fatalf("overlay %q, %v; want none", overlay, err)
	}
}

func TestCheckoutMustBeKueue(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := EnsureKueue(context.Background(), Options{CacheDir: t.TempDir(), Getenv: env(nil)}, KueueOptions{Source: src})
	if err == nil || !strings.Contains(err.Error(), "Source") || !strings.Contains(err.Error(), KueueModule) {
		t.Fatalf("got %v", err)
	}
}
