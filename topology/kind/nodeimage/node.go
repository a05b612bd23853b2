package nodeimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/internal/poll"
)

// The versions of the node image's own tools: what kind v0.33.0's base
// image and Kubernetes v1.36's kubeadm name, each served by the Go module
// proxy.
const (
	CRICtlVersion     = "v1.36.0"
	CNIPluginsVersion = "v1.9.0"
	CoreDNSVersion    = "v1.14.2" // kubeadm v1.36's CoreDNSVersion
	PauseVersion      = "3.10.2"  // kubeadm v1.36's PauseVersion
	EtcdImageVersion  = "3.6.8-0" // kubeadm v1.36's DefaultEtcdVersion
)

// PodSubnet is the pod network of a node made from the node image: its CNI
// configuration hands out addresses from it (one node per cluster), and
// the kind configuration must say the same.
const PodSubnet = "10.244.0.0/16"

// nodePodRange is the one node's share of PodSubnet.
const nodePodRange = "10.244.0.0/24"

// cniConfig is the node's pod network: ptp veth pairs with host-local
// addresses and masquerading to the outside, portmap for hostPorts (kind's
// kindnetd does the same on one node, but needs a registry image).
func cniConfig() string {
	return `{
  "cniVersion": "1.0.0",
  "name": "mktk-ptp",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": true,
      "mtu": 1400,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "` + nodePodRange + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`
}

// nodeBuildVersion changes when the way the node image is put together
// does, so an image built the old way is not reused.
const nodeBuildVersion = "2"

// binaries are the host files the node image is made of.
type binaries struct {
	kube      map[string]string // kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, kubelet, kubeadm, kubectl
	etcd      string
	coredns   string
	crictl    string
	cni       map[string]string // ptp, loopback, host-local, portmap
	shim      string
	pause     string
	kubeVer   string
	buildRoot string // where pause was compiled; removed by the caller
}

// gather builds (or finds in the cache) every binary of the node image.
func gather(ctx context.Context, o Options, kubeVersion string) (binaries, error) {
	ao := assets.Options{KubernetesVersion: kubeVersion, CacheDir: o.CacheDir, Progress: o.Progress}
	b := binaries{kube: map[string]string{}, cni: map[string]string{}, kubeVer: kubeVersion}
	cp, err := assets.Ensure(ctx, ao)
	if err != nil {
		return b, err
	}
	b.kube["kube-apiserver"], b.kube["kube-controller-manager"], b.etcd = cp.APIServer, cp.ControllerManager, cp.Etcd
	if b.kube["kube-scheduler"], err = assets.EnsureScheduler(ctx, ao); err != nil {
		return b, err
	}
	nb, err := assets.EnsureNodeBinaries(ctx, ao)
	if err != nil {
		return b, err
	}
	b.kube["kubelet"], b.kube["kubeadm"], b.kube["kubectl"], b.kube["kube-proxy"] = nb.Kubelet, nb.Kubeadm, nb.Kubectl, nb.KubeProxy
	tool := func(spec assets.OperatorSpec, v string) (string, error) {
		op, err := assets.EnsureOperator(ctx, ao, spec, v)
		return op.Path, err
	}
	if b.crictl, err = tool(assets.CRICtl(), CRICtlVersion); err != nil {
		return b, err
	}
	if b.coredns, err = tool(assets.CoreDNS(), CoreDNSVersion); err != nil {
		return b, err
	}
	for _, s := range assets.CNIPlugins() {
		p, err := tool(s, CNIPluginsVersion)
		if err != nil {
			return b, err
		}
		b.cni[strings.TrimPrefix(s.Name, "cni-")] = p
	}
	if b.shim, err = EnsureShim(ctx, o); err != nil {
		return b, err
	}
	if b.pause, err = buildPause(ctx, o, ao, kubeVersion); err != nil {
		return b, err
	}
	return b, nil
}

// buildPause compiles the pause binary from the kubernetes module's
// build/pause/linux/pause.c, statically, as its Makefile does, into the
// cache.
func buildPause(ctx context.Context, o Options, ao assets.Options, kubeVersion string) (string, error) {
	out := filepath.Join(o.CacheDir, "pause-"+PauseVersion, "pause")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	src, err := assets.ModuleDir(ctx, ao, "k8s.io/kubernetes", kubeVersion)
	if err != nil {
		return "", fmt.Errorf("nodeimage: pause: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := out + ".tmp"
	cmd := exec.CommandContext(ctx, "gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v"+PauseVersion+"-mktk", "-o", tmp, filepath.Join(src, "build", "pause", "linux", "pause.c"))
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("nodeimage: gcc -static pause.c (needs gcc and libc6-dev): %v: %s", err, tail(string(b)))
	}
	return out, os.Rename(tmp, out)
}

// key is a digest of everything the node image holds.
func (b binaries) key(base string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "build=%s base=%s k8s=%s cni=%s\n", nodeBuildVersion, base, b.kubeVer, cniConfig())
	files := map[string]string{"etcd": b.etcd, "coredns": b.coredns, "crictl": b.crictl, "shim": b.shim, "pause": b.pause}
	for k, v := range b.kube {
		files[k] = v
	}
	for k, v := range b.cni {
		files["cni-"+k] = v
	}
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, n := range names {
		sum, err := fileSHA256(files[n])
		if err != nil {
			return "", fmt.Errorf("nodeimage: %s: %w", n, err)
		}
		fmt.Fprintf(h, "%s %x\n", n, sum)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// component is one control-plane (or add-on) image kubeadm runs.
type component struct {
	image      string
	binary     string
	dest       string
	entrypoint string
	// extra are files or directories of the base image the image carries
	// too (with the libraries they load); links are symlinks to add.
	extra []string
	links map[string]string
	// user runs the image's process (empty: root); labels go on the image.
	user   string
	labels map[string]string
}

func (b binaries) components() []component {
	reg := "registry.k8s.io/"
	xt := map[string]string{}
	for _, n := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		xt["/usr/sbin/"+n] = "xtables-nft-multi"
	}
	return []component{
		{image: reg + "kube-apiserver:" + b.kubeVer, binary: b.kube["kube-apiserver"], dest: "/usr/local/bin/kube-apiserver"},
		{image: reg + "kube-controller-manager:" + b.kubeVer, binary: b.kube["kube-controller-manager"], dest: "/usr/local/bin/kube-controller-manager"},
		{image: reg + "kube-scheduler:" + b.kubeVer, binary: b.kube["kube-scheduler"], dest: "/usr/local/bin/kube-scheduler"},
		{image: reg + "kube-proxy:" + b.kubeVer, binary: b.kube["kube-proxy"], dest: "/usr/local/bin/kube-proxy",
			extra: []string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/conntrack", "/usr/lib/x86_64-linux-gnu/xtables"}, links: xt},
		{image: reg + "etcd:" + EtcdImageVersion, binary: b.etcd, dest: "/usr/local/bin/etcd"},
		{image: reg + "coredns/coredns:" + CoreDNSVersion, binary: b.coredns, dest: "/coredns", entrypoint: "/coredns"},
		{image: reg + "pause:" + PauseVersion, binary: b.pause, dest: "/pause", entrypoint: "/pause"},
	}
}

// closureScript copies /in/bin to dest, the extras, and every shared
// library any of them loads into /out, adds the links, and writes /out as a
// tar to stdout. It runs in a container of the base image, whose libraries
// the binaries were linked against (Debian's, as on the host).
func closureScript(c component) string {
	var s strings.Builder
	s.WriteString("set -eu\nmkdir -p /out/tmp /out/etc /out/var/run /out/run\nchmod 1777 /out/tmp\n")
	fmt.Fprintf(&s, "mkdir -p /out%s\ncp /in/bin /out%s\nchmod 0755 /out%s\n", filepath.Dir(c.dest), c.dest, c.dest)
	for _, e := range c.extra {
		fmt.Fprintf(&s, "cp -aL --parents %s /out/\n", e)
	}
	s.WriteString(`find /out -type f | while read -r f; do
  ldd "$f" 2>/dev/null | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}' | while read -r lib; do
    [ -e "/out$lib" ] || cp -L --parents "$lib" /out/
  done
done
`)
	links := make([]string, 0, len(c.links))
	for l := range c.links {
		links = append(links, l)
	}
	sort.Strings(links)
	for _, l := range links {
		fmt.Fprintf(&s, "ln -sf %s /out%s\n", c.links[l], l)
	}
	s.WriteString("tar -C /out -cf - .\n")
	return s.String()
}

// importComponent builds c as an image from its closure.
func importComponent(ctx context.Context, o Options, base string, c component) error {
	d := o.docker()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, o.Docker, "run", "--rm", "--network", "none", "--runtime", "runc",
		"--volume", c.binary+":/in/bin:ro", "--entrypoint", "/bin/bash", base, "-c", closureScript(c))
	cmd.Stdout, cmd.Stderr = pw, &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { pw.CloseWithError(cmd.Wait()) }()
	args := []string{"import", "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if c.entrypoint != "" {
		args = append(args, "--change", fmt.Sprintf("ENTRYPOINT [%q]", c.entrypoint))
	}
	if c.user != "" {
		args = append(args, "--change", "USER "+c.user)
	}
	keys := make([]string, 0, len(c.labels))
	for k := range c.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--change", fmt.Sprintf("LABEL %s=%s", k, c.labels[k]))
	}
	_, err := d.run(ctx, pr, append(args, "-", c.image)...)
	pr.Close()
	if err != nil {
		return fmt.Errorf("nodeimage: image %s from %s: %w (closure: %s)", c.image, c.binary, err, tail(stderr.String()))
	}
	return nil
}

// nodeRepo is the repository of the node images EnsureNode builds.
const nodeRepo = "mktk.local/kind-node"

// nodeRef is the node image's reference: mktk.local/kind-node:<Kubernetes
// version>-<digest of its contents>.
func nodeRef(kubeVersion, key string) string {
	return nodeRepo + ":" + kubeVersion + "-" + key
}

// IsOffline says whether ref is a node image EnsureNode built, which
// carries its own pod network: a kind cluster on it disables kind's
// default CNI and uses PodSubnet.
func IsOffline(ref string) bool {
	return strings.HasPrefix(ref, nodeRepo+":")
}

// EnsureNode returns a kind node image of kubeVersion (default
// assets.DefaultKubernetesVersion) built offline: the base image (EnsureBase)
// with kubelet, kubeadm and kubectl, crictl, the CNI plugins and a ptp pod
// network configuration (PodSubnet), the mktk-runc shim as the node's runc
// (privileged pods ask for capabilities the node lacks, as the node
// container did), and kubeadm's images (kube-apiserver, controller
// manager, scheduler, kube-proxy, etcd, CoreDNS, pause) preloaded into its
// containerd, each made from the binary built from its module and the
// libraries it loads. From the engine, else the cache's archive, else
// built: a cold cache builds every binary first (tens of minutes on 2
// cores); the image itself takes about a minute.
func EnsureNode(ctx context.Context, o Options, kubeVersion string) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	if kubeVersion == "" {
		kubeVersion = assets.DefaultKubernetesVersion
	}
	base, err := EnsureBase(ctx, o)
	if err != nil {
		return "", err
	}
	b, err := gather(ctx, o, kubeVersion)
	if err != nil {
		return "", err
	}
	key, err := b.key(base)
	if err != nil {
		return "", err
	}
	ref := nodeRef(kubeVersion, key)
	archive := "kind-node-" + kubeVersion + "-" + key + ".tar"
	return ref, o.ensureArchived(ctx, ref, archive, func(ctx context.Context) error {
		return buildNode(ctx, o, base, b, ref)
	})
}

func buildNode(ctx context.Context, o Options, base string, b binaries, ref string) error {
	start := time.Now()
	d := o.docker()
	comps := b.components()
	for _, c := range comps {
		o.logf("image %s from %s", c.image, c.binary)
		if err := importComponent(ctx, o, base, c); err != nil {
			return err
		}
	}
	defer func() {
		for _, c := range comps {
			d.run(context.Background(), nil, "rmi", c.image) //nolint:errcheck // they live on inside the node image
		}
	}()
	name := fmt.Sprintf("mktk-node-build-%d", os.Getpid())
	o.logf("building %s in container %s", ref, name)
	if _, err := d.run(ctx, nil, "run", "--detach", "--name", name, "--privileged", "--network", "none",
		"--tmpfs", "/tmp", "--entrypoint", "sleep", base, "infinity"); err != nil {
		return fmt.Errorf("nodeimage: the build container (privileged, as kind's node image build; `mktk kind probe` says whether this engine can): %w", err)
	}
	defer removeContainer(d, name)
	copies := [][2]string{
		{b.kube["kubelet"], "/usr/bin/kubelet"}, {b.kube["kubeadm"], "/usr/bin/kubeadm"}, {b.kube["kubectl"], "/usr/bin/kubectl"},
		{b.crictl, "/usr/local/bin/crictl"}, {b.shim, "/usr/local/sbin/runc"},
	}
	for n, p := range b.cni {
		copies = append(copies, [2]string{p, "/opt/cni/bin/" + n})
	}
	if _, err := d.run(ctx, nil, "exec", name, "mkdir", "-p", "/opt/cni/bin", "/etc/cni/net.d", "/usr/local/sbin"); err != nil {
		return err
	}
	for _, c := range copies {
		if _, err := d.run(ctx, nil, "cp", c[0], name+":"+c[1]); err != nil {
			return fmt.Errorf("nodeimage: copy %s into the node image: %w", c[0], err)
		}
		if _, err := d.run(ctx, nil, "exec", name, "chmod", "0755", c[1]); err != nil {
			return err
		}
	}
	spec, err := d.run(ctx, nil, "exec", name, "ctr", "oci", "spec")
	if err != nil {
		return fmt.Errorf("nodeimage: ctr oci spec: %w", err)
	}
	criBase, err := criBaseSpec([]byte(spec))
	if err != nil {
		return err
	}
	cfg, err := d.run(ctx, nil, "exec", name, "cat", "/etc/containerd/config.toml")
	if err != nil {
		return err
	}
	files := map[string]string{
		"/kind/version":                       b.kubeVer + "\n",
		"/etc/cni/net.d/10-mktk-ptp.conflist": cniConfig(),
		"/etc/containerd/cri-base.json":       string(criBase),
		"/etc/containerd/config.toml":         containerdConfig(cfg, "registry.k8s.io/pause:"+PauseVersion),
	}
	for path, content := range files {
		if _, err := d.run(ctx, strings.NewReader(content), "exec", "-i", name, "sh", "-c", "cat > "+path); err != nil {
			return fmt.Errorf("nodeimage: write %s: %w", path, err)
		}
	}
	if err := preload(ctx, o, name, comps); err != nil {
		return err
	}
	if _, err := d.run(ctx, nil, "commit",
		"--change", `ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]`,
		name, ref); err != nil {
		return fmt.Errorf("nodeimage: commit %s: %w", ref, err)
	}
	o.logf("%s built in %s", ref, time.Since(start).Round(time.Second))
	return nil
}

// preload starts containerd in the build container and imports every
// component image into its k8s.io namespace, pinned and unpacked later, as
// kind's node image build does.
func preload(ctx context.Context, o Options, name string, comps []component) error {
	d := o.docker()
	if _, err := d.run(ctx, nil, "exec", "--detach", name, "sh", "-c", "containerd >/tmp/containerd.log 2>&1"); err != nil {
		return fmt.Errorf("nodeimage: start containerd in the build container: %w", err)
	}
	err := poll.UntilEvery(ctx, time.Minute, 300*time.Millisecond, "containerd in the build container to answer `ctr version`", func(ctx context.Context) error {
		_, err := d.run(ctx, nil, "exec", name, "sh", "-c", "test -S /run/containerd/containerd.sock && ctr version >/dev/null")
		return err
	})
	if err != nil {
		return err
	}
	for _, c := range comps {
		var img bytes.Buffer
		if err := d.stream(ctx, &img, "save", c.image); err != nil {
			return err
		}
		if _, err := d.run(ctx, &img, "exec", "-i", name, "ctr", "--namespace=k8s.io", "images", "import",
			"--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack", "--digests", "-"); err != nil {
			return fmt.Errorf("nodeimage: preload %s: %w", c.image, err)
		}
	}
	if _, err := d.run(ctx, nil, "exec", name, "pkill", "containerd"); err != nil {
		return fmt.Errorf("nodeimage: stop containerd in the build container: %w", err)
	}
	return poll.UntilEvery(ctx, 30*time.Second, 300*time.Millisecond, "containerd in the build container to exit", func(ctx context.Context) error {
		if _, err := d.run(ctx, nil, "exec", name, "pgrep", "-x", "containerd"); err == nil {
			return fmt.Errorf("still running")
		}
		return nil
	})
}

// criBaseSpec is `ctr oci spec` with kind's product-files hook and no
// rlimits, as kind's base image makes /etc/containerd/cri-base.json.
func criBaseSpec(raw []byte) ([]byte, error) {
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("nodeimage: ctr oci spec: %w", err)
	}
	hooks, _ := spec["hooks"].(map[string]any)
	if hooks == nil {
		hooks = map[string]any{}
	}
	cc, _ := hooks["createContainer"].([]any)
	hooks["createContainer"] = append(cc, map[string]any{"path": "/kind/bin/mount-product-files.sh"})
	spec["hooks"] = hooks
	if p, ok := spec["process"].(map[string]any); ok {
		delete(p, "rlimits")
	}
	return json.MarshalIndent(spec, "", "  ")
}

// containerdConfig is kind's containerd configuration with the sandbox
// image this node image carries and restrict_oom_score_adj on: kubelet
// gives control-plane pods an oom_score_adj of -998, and lowering one needs
// CAP_SYS_RESOURCE, which a host short of it (this machine's) cannot give
// the node, so runc's init dies ("failed to update /proc/self/oom_score_adj:
// Permission denied") and no pod starts. Restricted, containerd raises such
// values to its own, as rootless kind does.
func containerdConfig(cfg, sandboxImage string) string {
	lines := strings.Split(strings.TrimRight(cfg, "\n"), "\n")
	for i, l := range lines {
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		switch key, _, _ := strings.Cut(strings.TrimSpace(l), "="); strings.TrimSpace(key) {
		case "sandbox_image":
			lines[i] = indent + fmt.Sprintf("sandbox_image = %q", sandboxImage)
		case "restrict_oom_score_adj":
			lines[i] = indent + "restrict_oom_score_adj = true"
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
