package assets

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecretReaderBuildsAndCaches builds the plugin into an empty cache from
// this module (as a fresh clone's first ClusterProfile test does), runs it
// with an ExecCredential naming no reachable cluster to see that it is the
// upstream plugin, and checks that a second call uses the cache.
func TestSecretReaderBuildsAndCaches(t *testing.T) {
	ctx := context.Background()
	var progress bytes.Buffer
	o := Options{Getenv: env(nil), CacheDir: t.TempDir(), Progress: &progress}
	start := time.Now()
	p, err := SecretReader(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s in %s; progress:\n%s", p, time.Since(start).Round(time.Millisecond), progress.String())
	if !strings.HasPrefix(p, o.CacheDir) || !strings.Contains(p, "secretreader-plugin_v") {
		t.Errorf("plugin at %s, want it under %s in a versioned directory", p, o.CacheDir)
	}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	const kc = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u, namespace: kueue-system}}]\nusers: [{name: u, user: {}}]\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, p)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+kubeconfig,
		`KUBERNETES_EXEC_INFO={"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false}}`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start = time.Now()
	err = cmd.Run()
	t.Logf("one exec: %s", time.Since(start).Round(time.Microsecond))
	if err == nil || stdout.Len() != 0 || !strings.Contains(stderr.String(), "[secretreader]") {
		t.Errorf("plugin with no cluster info: err=%v stdout=%q stderr=%q; want a [secretreader] error and no credential", err, stdout.String(), stderr.String())
	}

	progress.Reset()
	again, err := SecretReader(ctx, o)
	if err != nil || again != p || progress.Len() != 0 {
		t.Errorf("second call: %s, %v, progress %q; want the cached %s without a build", again, err, progress.String(), p)
	}
}

func TestSecretReaderFromEnv(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plugin")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := SecretReader(context.Background(), Options{Getenv: env(map[string]string{EnvSecretReader: bin}), CacheDir: t.TempDir()})
	if err != nil || p != bin {
		t.Fatalf("got %s, %v; want %s", p, err, bin)
	}
	_, err = SecretReader(context.Background(), Options{Getenv: env(map[string]string{EnvSecretReader: filepath.Join(dir, "none")}), CacheDir: t.TempDir()})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), EnvSecretReader) {
		t.Fatalf("want an error naming %s, got %v", EnvSecretReader, err)
	}
}

func TestSecretReaderNoBuild(t *testing.T) {
	_, err := SecretReader(context.Background(), Options{Getenv: env(nil), CacheDir: t.TempDir(), NoBuild: true})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), EnvSecretReader) {
		t.Fatalf("want ErrNotFound naming %s, got %v", EnvSecretReader, err)
	}
}
