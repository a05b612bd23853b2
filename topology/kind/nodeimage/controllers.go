package nodeimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// sourceLabel is the image label that holds the digest of the binary an
// image was made from, so an unchanged binary is not imported again and an
// image this package did not make is never replaced.
const sourceLabel = "io.x-k8s.mktk.source"

// NonRootUser is the user the controller images run as: distroless's
// nonroot, what the Kueue and JobSet images use (their charts set
// runAsNonRoot).
const NonRootUser = "65532:65532"

// EnsureControllerImage makes ref (for example the
// registry.k8s.io/kueue/kueue:v0.19.2 the Kueue chart deploys) from one
// controller binary: /manager, as the Kueue and JobSet charts run it, with
// the shared libraries it loads, run as NonRootUser, with links (path in
// the image → target: for a binary that reads a directory relative to its
// working directory, "/"). An image of that
// name that this package did not make is left alone (an error says so);
// one made from the same binary is kept.
func EnsureControllerImage(ctx context.Context, o Options, ref, binary string, links map[string]string) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	sum, err := fileDigest(binary)
	if err != nil {
		return fmt.Errorf("nodeimage: image %s: %w", ref, err)
	}
	if len(links) > 0 {
		keys := make([]string, 0, len(links))
		for k := range links {
			keys = append(keys, k+"="+links[k])
		}
		sort.Strings(keys)
		h := sha256.Sum256([]byte(sum + "\n" + strings.Join(keys, "\n")))
		sum = hex.EncodeToString(h[:])[:16]
	}
	d := o.docker()
	if d.imageID(ctx, ref) != "" {
		switch d.label(ctx, ref, sourceLabel) {
		case sum:
			return nil
		case "":
			return fmt.Errorf("nodeimage: image %s exists and was not made by the testkit; remove it or use it as it is", ref)
		}
	}
	base, err := EnsureBase(ctx, o)
	if err != nil {
		return err
	}
	o.logf("image %s from %s", ref, binary)
	return importComponent(ctx, o, base, component{image: ref, binary: binary, dest: "/manager", entrypoint: "/manager",
		user: NonRootUser, labels: map[string]string{sourceLabel: sum}, links: links})
}

// EnsureJobImage tags the busybox image (EnsureBusybox) as ref, the image
// the workload builders' pods name (topology.DefaultJobImage), unless an
// image of that name exists already.
func EnsureJobImage(ctx context.Context, o Options, ref string) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	d := o.docker()
	if d.imageID(ctx, ref) != "" {
		return nil
	}
	bb, err := EnsureBusybox(ctx, o)
	if err != nil {
		return err
	}
	if _, err := d.run(ctx, nil, "tag", bb, ref); err != nil {
		return fmt.Errorf("nodeimage: job image %s: %w", ref, err)
	}
	return nil
}

// fileDigest is the first 16 hex digits of the file's SHA-256.
func fileDigest(path string) (string, error) {
	sum, err := fileSHA256(path)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum)[:16], nil
}

// fileSHA256 is the SHA-256 of the file's contents.
func fileSHA256(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// PluginSource is where EnsurePluginImage's image holds the plugin: the
// install.CredentialsPlugin's Source.
const PluginSource = "/plugin"

// EnsurePluginImage makes an image holding an exec credentials plugin (the
// ClusterProfile connector's secretreader) at PluginSource, with cp and the
// libraries both load: install.CredentialsPlugin's init container copies the
// plugin from it into Kueue's pod (`cp /plugin <command>`). The reference,
// mktk.local/<binary's name>:<its digest>, is returned; an image of that
// name is reused.
func EnsurePluginImage(ctx context.Context, o Options, binary string) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	sum, err := fileDigest(binary)
	if err != nil {
		return "", fmt.Errorf("nodeimage: plugin image: %w", err)
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(filepath.Base(binary)))
	ref := "mktk.local/" + strings.Trim(name, "-") + ":" + sum
	if o.docker().imageID(ctx, ref) != "" {
		return ref, nil
	}
	base, err := EnsureBase(ctx, o)
	if err != nil {
		return "", err
	}
	o.logf("image %s from %s", ref, binary)
	return ref, importComponent(ctx, o, base, component{image: ref, binary: binary, dest: PluginSource,
		extra: []string{"/usr/bin/cp"}, user: NonRootUser, labels: map[string]string{sourceLabel: sum}})
}
