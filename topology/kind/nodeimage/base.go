package nodeimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/multikueue-testkit/testkit/internal/assets"
)

// basePackages are what kind's base image installs (its Dockerfile's
// clean-install list), with the container runtime from Debian instead of
// kind's own containerd and runc builds, minus what a single-node test
// cluster never uses (nfs-common, open-iscsi, e2fsprogs, curl, jq).
func basePackages() []string {
	return []string{
		"systemd", "systemd-sysv", "dbus",
		"containerd", "runc",
		"conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux", "mount", "kmod",
		"libseccomp2", "pigz", "fuse-overlayfs", "socat", "ebtables",
		"bash", "ca-certificates", "procps", "jq", // jq: kind's mount-product-files.sh hook reads the bundle with it
	}
}

// baseRef is the base image's reference: its tag is a digest of
// everything that goes into it (suite, packages, kind's base files), so a
// change builds a new one and an unchanged one is reused.
func baseRef(o Options, files string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "suite=%s\npackages=%s\nkind=%s\n", o.Suite, strings.Join(basePackages(), ","), KindVersion)
	err := filepath.WalkDir(files, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(files, p)
		fmt.Fprintf(h, "%s %x\n", rel, sha256.Sum256(raw))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("nodeimage: reading kind's base files %s: %w", files, err)
	}
	return "mktk.local/kind-base:" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// kindBaseFiles is images/base/files of the sigs.k8s.io/kind module.
func kindBaseFiles(ctx context.Context, o Options) (string, error) {
	dir, err := assets.ModuleDir(ctx, assets.Options{CacheDir: o.CacheDir}, "sigs.k8s.io/kind", KindVersion)
	if err != nil {
		return "", fmt.Errorf("nodeimage: kind's base files: %w", err)
	}
	return filepath.Join(dir, "images", "base", "files"), nil
}

// EnsureBase returns the kind base image: from the engine, else from the
// cache's archive, else built (a few minutes: debootstrap fetches and
// unpacks some 150 Debian packages). Building needs root and debootstrap;
// the error says which is missing.
func EnsureBase(ctx context.Context, o Options) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	files, err := kindBaseFiles(ctx, o)
	if err != nil {
		return "", err
	}
	ref, err := baseRef(o, files)
	if err != nil {
		return "", err
	}
	archive := strings.ReplaceAll(strings.TrimPrefix(ref, "mktk.local/"), ":", "-") + ".tar"
	err = o.ensureArchived(ctx, ref, archive, func(ctx context.Context) error {
		return buildBase(ctx, o, files, ref)
	})
	return ref, err
}

func buildBase(ctx context.Context, o Options, files, ref string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("nodeimage: building %s needs root (debootstrap and chroot); run as root or load the archive into the cache", ref)
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("nodeimage: building %s needs debootstrap from Debian's packages (apt-get install debootstrap): %w", ref, err)
	}
	work, err := os.MkdirTemp("", "mktk-kind-base-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "root")
	start := time.Now()
	o.logf("building %s: debootstrap %s from %s (a few minutes)", ref, o.Suite, o.Mirror)
	var log strings.Builder
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--include="+strings.Join(basePackages(), ","), o.Suite, root, o.Mirror)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nodeimage: debootstrap %s from %s: %v: %s", o.Suite, o.Mirror, err, tail(log.String()))
	}
	o.logf("debootstrap done in %s; applying kind %s's base files", time.Since(start).Round(time.Second), KindVersion)
	if err := applyKindFiles(ctx, files, root); err != nil {
		return err
	}
	o.logf("importing %s", ref)
	pr, pw := io.Pipe()
	tarCmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "-C", root, "-cf", "-", ".")
	tarCmd.Stdout = pw
	var tarErr strings.Builder
	tarCmd.Stderr = &tarErr
	if err := tarCmd.Start(); err != nil {
		return err
	}
	go func() { pw.CloseWithError(tarCmd.Wait()) }()
	_, err = o.docker().run(ctx, pr, "import",
		"--change", `ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]`,
		"--change", "ENV container=docker",
		"-", ref)
	pr.Close()
	if err != nil {
		return fmt.Errorf("nodeimage: import %s: %w (tar: %s)", ref, err, tail(tarErr.String()))
	}
	o.logf("%s built in %s", ref, time.Since(start).Round(time.Second))
	return nil
}

// applyKindFiles does what kind's base Dockerfile does after its packages:
// its files in place, the units' wants cleared, containerd and
// undo-mount-hacks enabled, binfmt masked, the journal off the kernel log.
func applyKindFiles(ctx context.Context, files, root string) error {
	err := filepath.WalkDir(files, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(files, p)
		if rel == "." || strings.HasPrefix(rel, "LICENSES") {
			return nil
		}
		dst := filepath.Join(root, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(rel, "usr/local/bin/") || strings.HasPrefix(rel, "kind/bin/") {
			mode = 0o755
		}
		os.Remove(dst)
		return os.WriteFile(dst, raw, mode)
	})
	if err != nil {
		return fmt.Errorf("nodeimage: copying kind's base files: %w", err)
	}
	for _, glob := range []string{
		"lib/systemd/system/multi-user.target.wants/*",
		"etc/systemd/system/*.wants/*",
		"lib/systemd/system/local-fs.target.wants/*",
		"lib/systemd/system/sockets.target.wants/*udev*",
		"lib/systemd/system/sockets.target.wants/*initctl*",
		"lib/systemd/system/basic.target.wants/*",
		"lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
		"var/cache/apt/archives/*.deb",
		"var/lib/apt/lists/*",
	} {
		matches, _ := filepath.Glob(filepath.Join(root, glob))
		for _, m := range matches {
			os.RemoveAll(m)
		}
	}
	if err := snapshotterFromVar(filepath.Join(root, "usr/local/bin/entrypoint")); err != nil {
		return err
	}
	if err := appendFile(filepath.Join(root, "etc/systemd/journald.conf"), "ReadKMsg=no\n"); err != nil {
		return err
	}
	for _, dir := range []string{"etc/kubernetes/manifests", "usr/local/bin"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			return err
		}
	}
	// kind's containerd.service starts /usr/local/bin/containerd, its own
	// build; this image has Debian's.
	link := filepath.Join(root, "usr/local/bin/containerd")
	os.Remove(link)
	if err := os.Symlink("/usr/bin/containerd", link); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"systemctl", "enable", "containerd.service", "undo-mount-hacks.service", "kubelet.service"},
		{"systemctl", "mask", "systemd-binfmt.service"},
	} {
		// kubelet.service names /usr/bin/kubelet, which only the node image
		// carries; enabling a unit does not need its binary.
		out, err := exec.CommandContext(ctx, "chroot", append([]string{root}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nodeimage: chroot %s: %v: %s", strings.Join(args, " "), err, tail(string(out)))
		}
	}
	return nil
}

// entrypointFSCheck is the line of kind's entrypoint that picks
// containerd's snapshotter from the file system of /kind, the container's
// root.
const entrypointFSCheck = `container_filesystem="$(stat -f -c %T /kind)"`

// snapshotterFromVar makes kind's entrypoint pick the snapshotter from the
// file system containerd's snapshots live on, /var (kind mounts a volume
// there), instead of the container's root: on an engine whose storage
// driver is fuse-overlayfs (this machine's) the root is FUSE, so kind picks
// the fuse-overlayfs snapshotter, which needs a plugin process the image
// does not have, while /var is a plain disk where overlayfs works (the
// probe runs a container on it).
func snapshotterFromVar(entrypoint string) error {
	raw, err := os.ReadFile(entrypoint)
	if err != nil {
		return fmt.Errorf("nodeimage: kind's entrypoint: %w", err)
	}
	if !strings.Contains(string(raw), entrypointFSCheck) {
		return fmt.Errorf("nodeimage: kind %s's entrypoint has no %s line to point at /var; the snapshotter choice changed upstream", KindVersion, entrypointFSCheck)
	}
	fixed := strings.Replace(string(raw), entrypointFSCheck, `container_filesystem="$(stat -f -c %T /var/lib/containerd 2>/dev/null || stat -f -c %T /kind)"`, 1)
	return os.WriteFile(entrypoint, []byte(fixed), 0o755)
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
