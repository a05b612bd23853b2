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

func fakeBinaries(t *testing.T, dir string) {
	t.Helper()
	for _, n := range []string{"kube-apiserver", "etcd"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEnvWins(t *testing.T) {
	dir := t.TempDir()
	fakeBinaries(t, dir)
	b, err := Ensure(context.Background(), Options{Getenv: env(map[string]string{EnvAssets: dir}), CacheDir: t.TempDir()})
	if err != nil || b.Source != "env" || b.APIServer != filepath.Join(dir, "kube-apiserver") {
		t.Fatalf("got %+v, %v", b, err)
	}
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
	b, err := Ensure(context.Background(), o)
	if err != nil || b.Source != "cache" {
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
