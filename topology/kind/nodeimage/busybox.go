package nodeimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"time"
)

// BusyboxPath is where Debian's busybox-static package puts its binary.
const BusyboxPath = "/bin/busybox"

// busyboxApplets are the commands the probe and the job image run.
func busyboxApplets() []string {
	return []string{"sh", "sleep", "echo", "true", "false", "cat", "ls", "env", "date", "test"}
}

// EnsureBusybox returns a one-binary image of the static busybox at
// BusyboxPath: the smallest image a container can run, for the probe's
// nested container and for jobs. Its tag is the binary's digest; it is
// imported from the file in a second, so it is not archived.
func EnsureBusybox(ctx context.Context, o Options) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return "", fmt.Errorf("nodeimage: the busybox image needs Debian's busybox-static (apt-get install busybox-static): %w", err)
	}
	if err := staticELF(raw); err != nil {
		return "", fmt.Errorf("nodeimage: %s: %w (install busybox-static, not busybox)", BusyboxPath, err)
	}
	sum := sha256.Sum256(raw)
	ref := "mktk.local/busybox:" + hex.EncodeToString(sum[:])[:12]
	d := o.docker()
	if d.imageID(ctx, ref) != "" {
		return ref, nil
	}
	layer, err := busyboxLayer(raw)
	if err != nil {
		return "", err
	}
	if _, err := d.run(ctx, bytes.NewReader(layer), "import", "--change", `CMD ["/bin/sh"]`, "-", ref); err != nil {
		return "", fmt.Errorf("nodeimage: import %s: %w", ref, err)
	}
	o.logf("imported %s from %s", ref, BusyboxPath)
	return ref, nil
}

// staticELF errs unless raw is an ELF executable with no interpreter.
func staticELF(raw []byte) error {
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("dynamically linked")
		}
	}
	return nil
}

// busyboxLayer is a tar of bin/busybox and one symlink per applet.
func busyboxLayer(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	hdrs := []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(raw)), ModTime: epoch},
	}
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(raw); err != nil {
				return nil, err
			}
		}
	}
	for _, a := range busyboxApplets() {
		if err := tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
