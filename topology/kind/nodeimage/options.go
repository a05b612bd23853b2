// Package nodeimage builds, offline, the images a kind cluster needs, and
// probes whether this Docker Engine can run kind's node containers at all.
//
// No registry is reachable on the machines the testkit runs on, so nothing
// can be pulled: the kind base image comes from a Debian root made with
// debootstrap from Debian's packages plus kind's own base files (from the
// sigs.k8s.io/kind module), and the small images the probe and the jobs use
// from Debian's busybox-static. Every image is kept in the asset cache
// (docker save) and loaded from there on the next run.
//
// Probe answers the first question of all: can this engine start a
// privileged container with systemd as PID 1 and containerd inside, and
// run a container within it? Run it with `mktk kind probe`.
package nodeimage

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/multikueue-testkit/testkit/internal/assets"
)

// KindVersion is the kind release whose base-image files (entrypoint,
// systemd units, containerd configuration) the base image carries; the
// testkit's go.mod pins the same sigs.k8s.io/kind.
const KindVersion = "v0.33.0"

// DefaultSuite is the Debian release the base image is made from: the one
// this machine's package mirror serves.
const DefaultSuite = "bookworm"

// EnvDebianMirror overrides the Debian mirror debootstrap reads from.
const EnvDebianMirror = "MKTK_DEBIAN_MIRROR"

// Options say where images come from and where they are kept.
type Options struct {
	// Docker is the docker CLI; default "docker" on PATH.
	Docker string
	// CacheDir is the asset cache; default assets.CacheDir (the
	// $MKTK_ASSETS_DIR or the user cache directory). Image archives go to
	// its kind-images directory.
	CacheDir string
	// Mirror is the Debian mirror; default $MKTK_DEBIAN_MIRROR, else the
	// first URIs of /etc/apt/sources.list.d/debian.sources, else
	// http://deb.debian.org/debian.
	Mirror string
	// Suite is the Debian release; default DefaultSuite.
	Suite string
	// Progress gets one line per step (nil: none).
	Progress io.Writer
}

func (o Options) withDefaults() (Options, error) {
	if o.Docker == "" {
		o.Docker = "docker"
	}
	if _, err := exec.LookPath(o.Docker); err != nil {
		return o, fmt.Errorf("nodeimage: Options.Docker: %q not found: %w", o.Docker, err)
	}
	if o.CacheDir == "" {
		dir, err := assets.CacheDir(assets.Options{})
		if err != nil {
			return o, fmt.Errorf("nodeimage: Options.CacheDir: %w", err)
		}
		o.CacheDir = dir
	}
	if o.Mirror == "" {
		o.Mirror = os.Getenv(EnvDebianMirror)
	}
	if o.Mirror == "" {
		o.Mirror = aptMirror("/etc/apt/sources.list.d/debian.sources")
	}
	if o.Suite == "" {
		o.Suite = DefaultSuite
	}
	if strings.ContainsAny(o.Suite, " /\t\n") {
		return o, fmt.Errorf("nodeimage: Options.Suite: %q is not a Debian release name", o.Suite)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o, nil
}

func (o Options) docker() docker { return docker{bin: o.Docker} }

func (o Options) imageDir() string { return filepath.Join(o.CacheDir, "kind-images") }

func (o Options) logf(format string, args ...any) {
	fmt.Fprintf(o.Progress, "nodeimage: "+format+"\n", args...)
}

// aptMirror is the first URIs of a deb822 sources file, else Debian's
// redirector.
func aptMirror(path string) string {
	const fallback = "http://deb.debian.org/debian"
	f, err := os.Open(path)
	if err != nil {
		return fallback
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "URIs:"); ok {
			if fields := strings.Fields(v); len(fields) > 0 {
				return fields[0]
			}
		}
	}
	return fallback
}

// ensureArchived returns ref when the engine has it, else loads it from its
// archive in the cache, else builds it with build and saves it there.
func (o Options) ensureArchived(ctx context.Context, ref, archive string, build func(context.Context) error) error {
	d := o.docker()
	if d.imageID(ctx, ref) != "" {
		return nil
	}
	// One build at a time on this machine: test binaries of several
	// packages (go test ./examples/...) prepare the same images at once.
	unlock, err := assets.LockDir(ctx, o.imageDir())
	if err != nil {
		return fmt.Errorf("nodeimage: %s: %w", ref, err)
	}
	defer unlock()
	if d.imageID(ctx, ref) != "" {
		return nil // the process that held the lock made it
	}
	path := filepath.Join(o.imageDir(), archive)
	if _, err := os.Stat(path); err == nil {
		o.logf("loading %s from %s", ref, path)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := d.run(ctx, f, "load", "--quiet"); err != nil {
			return fmt.Errorf("nodeimage: load %s: %w", ref, err)
		}
		if d.imageID(ctx, ref) != "" {
			return nil
		}
		o.logf("%s held no %s; building it", path, ref)
	}
	if err := build(ctx); err != nil {
		return err
	}
	if err := os.MkdirAll(o.imageDir(), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if _, err := d.run(ctx, nil, "save", "--output", tmp, ref); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("nodeimage: save %s to the cache: %w", ref, err)
	}
	return os.Rename(tmp, path)
}

// NetworkMarker is the file that says the testkit's kind clusters made the
// container network named network (kind creates it and never deletes it):
// whichever provider closes last removes the network and the file, even
// when another test binary's clusters made it. A network without the file
// was there before, and is left alone.
func NetworkMarker(o Options, network string) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	return filepath.Join(o.imageDir(), "network-"+network+".made-by-mktk"), nil
}
