package existing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func writeKubeconfig(t *testing.T, path, server string, contexts ...string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for i, ctx := range append([]string{"default"}, contexts...) {
		name := ctx
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server + "/" + name}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "t"}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		if i == 0 {
			cfg.CurrentContext = name
		}
	}
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestParseKubeconfigsList(t *testing.T) {
	dir := t.TempDir()
	writeKubeconfig(t, filepath.Join(dir, "m"), "https://m:6443", "other")
	writeKubeconfig(t, filepath.Join(dir, "w"), "https://w:6443")
	mgr, workers, err := ParseKubeconfigs("manager=" + filepath.Join(dir, "m") + ":other, east=" + filepath.Join(dir, "w"))
	if err != nil {
		t.Fatal(err)
	}
	if mgr.Name != "manager" || mgr.Config.Host != "https://m:6443/other" {
		t.Errorf("manager %s at %s; want the context named after the colon", mgr.Name, mgr.Config.Host)
	}
	if len(workers) != 1 || workers[0].Name != "east" || workers[0].Config.Host != "https://w:6443/default" {
		t.Errorf("workers %+v", workers)
	}
}

func TestParseKubeconfigsDirectory(t *testing.T) {
	dir := t.TempDir()
	writeKubeconfig(t, filepath.Join(dir, "manager.kubeconfig"), "https://m:6443")
	writeKubeconfig(t, filepath.Join(dir, "worker-2.yaml"), "https://w2:6443")
	writeKubeconfig(t, filepath.Join(dir, "worker-1"), "https://w1:6443")
	mgr, workers, err := ParseKubeconfigs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if mgr.Name != "manager" || len(workers) != 2 || workers[0].Name != "worker-1" || workers[1].Name != "worker-2" {
		t.Errorf("manager %q, workers %v", mgr.Name, []string{workers[0].Name, workers[1].Name})
	}
}

func TestParseKubeconfigsErrors(t *testing.T) {
	dir := t.TempDir()
	writeKubeconfig(t, filepath.Join(dir, "w"), "https://w:6443")
	w := filepath.Join(dir, "w")
	for _, tc := range []struct{ value, want string }{
		{"manager", `item 1 "manager": want NAME=PATH[:CONTEXT]`},
		{"east=" + w, `no cluster named "manager"`},
		{"manager=" + w, "no worker cluster besides the manager"},
		{"manager=" + w + ",a=" + w + ",a=" + w, `cluster "a" named twice`},
		{"manager=" + w + ":nope,a=" + w, `cluster "manager": kubeconfig ` + w + " (context nope)"},
		{"manager=/does/not/exist,a=" + w, `cluster "manager": kubeconfig /does/not/exist`},
	} {
		_, _, err := ParseKubeconfigs(tc.value)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseKubeconfigs(%q) = %v; want %q", tc.value, err, tc.want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvKubeconfigs, "")
	if _, ok, err := FromEnv(); ok || err != nil {
		t.Fatalf("unset: ok=%v err=%v; want local", ok, err)
	}
	dir := t.TempDir()
	writeKubeconfig(t, filepath.Join(dir, "manager"), "https://m:6443")
	writeKubeconfig(t, filepath.Join(dir, "w"), "https://w:6443")
	t.Setenv(EnvKubeconfigs, dir)
	o, ok, err := FromEnv()
	if !ok || err != nil || o.Mode != ModeAdopt {
		t.Fatalf("dir: ok=%v err=%v mode=%q; want adopt by default", ok, err, o.Mode)
	}
	t.Setenv(EnvAttachMode, "wire")
	if o, _, _ := FromEnv(); o.Mode != ModeWire {
		t.Errorf("mode %q; want wire", o.Mode)
	}
	t.Setenv(EnvAttachMode, "borrow")
	if _, _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), `MKTK_ATTACH_MODE="borrow"`) {
		t.Errorf("err = %v; want the bad mode named", err)
	}
}
