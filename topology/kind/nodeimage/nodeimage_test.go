package nodeimage

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEngine(t *testing.T) {
	raw := `{"ServerVersion":"20.10.24+dfsg1","Driver":"fuse-overlayfs","CgroupDriver":"cgroupfs","CgroupVersion":"1",
	"KernelVersion":"6.18.44","OperatingSystem":"Debian GNU/Linux 12 (bookworm)","DefaultRuntime":"runc",
	"Runtimes":{"runc":{"path":"runc"},"mktk-runc":{"path":"/x/mktk-runc"}}}`
	e, err := parseEngine([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if e.ServerVersion != "20.10.24+dfsg1" || e.Storage != "fuse-overlayfs" || e.CgroupVersion != "1" || e.DefaultRuntime != "runc" {
		t.Errorf("engine = %+v", e)
	}
	if strings.Join(e.Runtimes, ",") != "mktk-runc,runc" {
		t.Errorf("runtimes = %v, want sorted mktk-runc,runc", e.Runtimes)
	}
	// A CLI without a daemon prints ServerErrors and no version.
	_, err = parseEngine([]byte(`{"ServerErrors":["Cannot connect to the Docker daemon at unix:///var/run/docker.sock"]}`))
	if err == nil || !strings.Contains(err.Error(), "Cannot connect") {
		t.Errorf("no daemon: err = %v, want the server error named", err)
	}
}

func TestShimConfigRoundTrip(t *testing.T) {
	orig := []byte(`{"data-root": "/var/lib/docker", "storage-driver": "fuse-overlayfs", "runtimes": {"crun": {"path": "/usr/bin/crun"}}}`)
	on, err := withShim(orig, "/cache/mktk-runc/mktk-runc")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(on, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["default-runtime"] != ShimRuntime || cfg["storage-driver"] != "fuse-overlayfs" {
		t.Errorf("enabled config = %s", on)
	}
	rts := cfg["runtimes"].(map[string]any)
	if rts["crun"] == nil || rts[ShimRuntime].(map[string]any)["path"] != "/cache/mktk-runc/mktk-runc" {
		t.Errorf("runtimes = %v, want crun kept and the shim added", rts)
	}
	off, err := withoutShim(on)
	if err != nil {
		t.Fatal(err)
	}
	cfg = nil
	if err := json.Unmarshal(off, &cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg["default-runtime"]; ok {
		t.Errorf("disabled config still has default-runtime: %s", off)
	}
	if rts := cfg["runtimes"].(map[string]any); rts[ShimRuntime] != nil || rts["crun"] == nil {
		t.Errorf("disabled runtimes = %v", rts)
	}
	// An empty or absent file is an empty configuration.
	if _, err := withShim(nil, "/s"); err != nil {
		t.Errorf("empty config: %v", err)
	}
	if _, err := withShim([]byte("{not json"), "/s"); err == nil {
		t.Error("a broken daemon.json was overwritten instead of refused")
	}
}

// TestKeptConfigIsRestoredByteForByte drives the file side of
// EnableShim/DisableShim on a scratch file (the reload needs a dockerd).
func TestKeptConfigIsRestoredByteForByte(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "daemon.json")
	orig := []byte("{\"mtu\": 1400,   \"log-driver\": \"json-file\"}\n")
	if err := os.WriteFile(cfg, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second enable keeps the first original
		if err := writeShimConfig(cfg, "/s/mktk-runc"); err != nil {
			t.Fatal(err)
		}
	}
	on, _ := os.ReadFile(cfg)
	if !strings.Contains(string(on), `"default-runtime": "mktk-runc"`) {
		t.Errorf("enabled: %s", on)
	}
	if err := restoreConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(cfg); !bytes.Equal(got, orig) {
		t.Errorf("restored %q, want %q byte for byte", got, orig)
	}
	if _, err := os.Stat(backupPath(cfg)); !os.IsNotExist(err) {
		t.Errorf("the kept copy is left behind: %v", err)
	}
	// Without a kept copy, disable removes the shim's keys only.
	if err := os.WriteFile(cfg, on, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := restoreConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(cfg); strings.Contains(string(got), ShimRuntime) || !strings.Contains(string(got), "1400") {
		t.Errorf("without a kept copy: %s", got)
	}
}

// The transient configuration DisableShim reloads names a default runtime,
// since dockerd's reload keeps the old default when the key is absent.
func TestWithDefaultRuntime(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"mtu": 1400}`, "runc"},
		{`{"default-runtime": "crun", "runtimes": {"crun": {"path": "/usr/bin/crun"}}}`, "crun"},
		{`{"default-runtime": "mktk-runc"}`, "runc"},
		{``, "runc"},
	} {
		out, def, err := withDefaultRuntime([]byte(tc.in))
		if err != nil || def != tc.want || !strings.Contains(string(out), `"default-runtime": "`+tc.want+`"`) {
			t.Errorf("%q: %s, %q, %v; want default %q", tc.in, out, def, err, tc.want)
		}
	}
}

func TestBusyboxLayer(t *testing.T) {
	layer, err := busyboxLayer([]byte("binary"))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(layer))
	links := map[string]string{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Typeflag == tar.TypeSymlink {
			links[h.Name] = h.Linkname
		}
	}
	for _, a := range []string{"sh", "sleep", "echo"} {
		if links["bin/"+a] != "busybox" {
			t.Errorf("bin/%s -> %q, want busybox", a, links["bin/"+a])
		}
	}
	if err := staticELF([]byte("not elf")); err == nil {
		t.Error("a non-ELF file passed as a static binary")
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err == nil {
		// The test binary is linked dynamically when cgo is on, statically
		// when not; either way it is an ELF, so only the form is checked.
		if err := staticELF(self); err != nil && !strings.Contains(err.Error(), "dynamically") {
			t.Errorf("test binary: %v", err)
		}
	}
}

func TestErrorLine(t *testing.T) {
	msg := "`docker run --detach ...`: exit status 125: docker: Error response from daemon: failed to create shim task: OCI runtime create failed: unable to apply caps: operation not permitted: unknown.\nSee 'docker run --help'."
	if got := errorLine(msg); !strings.HasPrefix(got, "Error response from daemon: failed to create shim task") {
		t.Errorf("errorLine = %q", got)
	}
	if got := errorLine("a\nlast"); got != "last" {
		t.Errorf("errorLine = %q, want the last line", got)
	}
}

func TestFixNotes(t *testing.T) {
	failed := Check{Name: "privileged node container, runtime runc", Saw: "Error response from daemon: ... unable to apply caps: operation not permitted"}
	for _, tc := range []struct {
		name string
		r    Report
		want string
	}{
		{"no shim registered", Report{MissingCaps: []string{"CAP_SYS_RESOURCE"}, Checks: []Check{failed}}, "register the mktk-runc shim"},
		{"shim registered, not default", Report{MissingCaps: []string{"CAP_SYS_RESOURCE"}, Checks: []Check{failed, {OK: true}}, Runtime: ShimRuntime, Engine: Engine{DefaultRuntime: "runc", Runtimes: []string{ShimRuntime, "runc"}}}, "make it the default"},
		{"shim default", Report{MissingCaps: []string{"CAP_SYS_RESOURCE"}, Checks: []Check{failed, {OK: true}}, Runtime: ShimRuntime, Engine: Engine{DefaultRuntime: ShimRuntime, Runtimes: []string{ShimRuntime}}}, "kind runs unchanged"},
	} {
		notes := fixNotes(tc.r)
		if len(notes) != 1 || !strings.Contains(notes[0], tc.want) || !strings.Contains(notes[0], "CAP_SYS_RESOURCE") {
			t.Errorf("%s: notes = %q, want one naming CAP_SYS_RESOURCE and %q", tc.name, notes, tc.want)
		}
	}
	if notes := fixNotes(Report{Checks: []Check{{OK: true}}}); len(notes) != 0 {
		t.Errorf("nothing failed, yet notes = %q", notes)
	}
}

func TestAptMirror(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "debian.sources")
	os.WriteFile(p, []byte("Types: deb\n# a comment\nURIs: http://mirror.example/debian http://second\nSuites: bookworm\n"), 0o644)
	if got := aptMirror(p); got != "http://mirror.example/debian" {
		t.Errorf("aptMirror = %q", got)
	}
	if got := aptMirror(filepath.Join(dir, "absent")); got != "http://deb.debian.org/debian" {
		t.Errorf("aptMirror(absent) = %q", got)
	}
}

func TestOptionsNameTheField(t *testing.T) {
	_, err := Options{Docker: "/no/such/docker"}.withDefaults()
	if err == nil || !strings.Contains(err.Error(), "Options.Docker") {
		t.Errorf("bad docker: %v", err)
	}
	_, err = Options{Docker: "sh", Suite: "book worm", CacheDir: t.TempDir()}.withDefaults()
	if err == nil || !strings.Contains(err.Error(), "Options.Suite") {
		t.Errorf("bad suite: %v", err)
	}
}

// TestProbeOnThisEngine runs the probe for real: MKTK_KIND_PROBE=1 (it
// needs a Docker Engine, root and, on a cold cache, debootstrap and a few
// minutes).
func TestProbeOnThisEngine(t *testing.T) {
	if os.Getenv("MKTK_KIND_PROBE") != "1" {
		t.Skip("set MKTK_KIND_PROBE=1 to probe this Docker Engine (builds the kind base image on a cold cache)")
	}
	r, err := Probe(context.Background(), Options{Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.Markdown())
	if !r.CanRunKind {
		t.Errorf("this engine cannot run kind's node containers:\n%s", r.Markdown())
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestCRIBaseSpec(t *testing.T) {
	raw := []byte(`{"ociVersion":"1.1.0","process":{"args":["sh"],"rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}]},"hooks":{"createContainer":[{"path":"/other"}]}}`)
	out, err := criBaseSpec(raw)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Process map[string]any
		Hooks   struct {
			CreateContainer []struct{ Path string }
		}
	}
	if err := json.Unmarshal(out, &spec); err != nil {
		t.Fatal(err)
	}
	if _, ok := spec.Process["rlimits"]; ok {
		t.Error("rlimits kept; kind's cri-base.json drops them")
	}
	if n := len(spec.Hooks.CreateContainer); n != 2 || spec.Hooks.CreateContainer[1].Path != "/kind/bin/mount-product-files.sh" || spec.Hooks.CreateContainer[0].Path != "/other" {
		t.Errorf("hooks = %+v, want /other then kind's product-files hook", spec.Hooks.CreateContainer)
	}
	if _, err := criBaseSpec([]byte("not json")); err == nil {
		t.Error("a broken spec passed")
	}
}

func TestContainerdConfig(t *testing.T) {
	cfg := "[plugins.\"io.containerd.grpc.v1.cri\"]\n  # use fixed sandbox image\n  sandbox_image = \"registry.k8s.io/pause:3.10\"\n  # restrict_oom_score_adj needs to be true when running inside UserNS (rootless)\n  restrict_oom_score_adj = false\n  other = 1\n"
	got := containerdConfig(cfg, "registry.k8s.io/pause:3.10.2")
	for _, want := range []string{"  sandbox_image = \"registry.k8s.io/pause:3.10.2\"\n", "  restrict_oom_score_adj = true\n", "other = 1", "# restrict_oom_score_adj needs"} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "pause:3.10\"") || strings.Contains(got, "= false") {
		t.Errorf("old values left:\n%s", got)
	}
}

func TestClosureScript(t *testing.T) {
	b := binaries{kube: map[string]string{"kube-proxy": "/c/kube-proxy"}, kubeVer: "v1.36.3"}
	var proxy component
	for _, c := range b.components() {
		if strings.Contains(c.image, "kube-proxy") {
			proxy = c
		}
	}
	if proxy.image != "registry.k8s.io/kube-proxy:v1.36.3" {
		t.Fatalf("kube-proxy component = %+v", proxy)
	}
	s := closureScript(proxy)
	for _, want := range []string{"cp /in/bin /out/usr/local/bin/kube-proxy", "cp -aL --parents /usr/sbin/xtables-nft-multi /out/", "ln -sf xtables-nft-multi /out/usr/sbin/iptables-restore", "ldd", "tar -C /out -cf - ."} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if !IsOffline(nodeRef("v1.36.3", "0123456789ab")) || IsOffline("kindest/node:v1.35.8") {
		t.Error("IsOffline does not tell the offline image from kind's")
	}
}
