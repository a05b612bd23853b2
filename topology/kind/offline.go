package kind

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
	"github.com/multikueue-testkit/testkit/topology/kind/nodeimage"
)

// prepareOffline makes, on docker, what a machine without a registry
// lacks: the node image when Options.NodeImage is empty
// (nodeimage.EnsureNode), and, unless Options.SkipImageLoad, the Kueue and
// JobSet controller images the charts deploy (from the same binaries the
// local topology runs, built from their modules at the chart's version)
// and the workload builders' job image (busybox). Images the local runtime
// has already are used as they are; a controller image set by
// Options.KueueImage or Options.JobSetImage is never built.
func (p *Provider) prepareOffline(ctx context.Context, kueueRef, jobSetRef string, progress io.Writer) error {
	if p.opts.NodeImage != "" && p.opts.SkipImageLoad {
		return nil
	}
	if p.rt.Name != RuntimeDocker {
		if p.opts.NodeImage == "" {
			return fmt.Errorf("kind: Options.NodeImage: empty, and the offline node image is built with docker only (runtime %s): name a node image", p.rt.Name)
		}
		return nil
	}
	no := nodeimage.Options{Docker: p.rt.CLI, Progress: progress}
	if p.opts.NodeImage == "" {
		ref, err := nodeimage.EnsureNode(ctx, no, "")
		if err != nil {
			return fmt.Errorf("kind: the offline node image: %w", err)
		}
		p.mu.Lock()
		p.opts.NodeImage = ref
		p.mu.Unlock()
		fmt.Fprintf(progress, "kind: node image %s (built offline)\n", ref)
	}
	if p.opts.SkipImageLoad {
		return nil
	}
	ao := assets.Options{Progress: progress}
	if p.opts.KueueImage == (install.Image{}) {
		if v, ok := releaseTag(kueueRef); ok {
			bin, err := assets.EnsureKueue(ctx, ao, assets.KueueOptions{Version: v})
			if err != nil {
				return fmt.Errorf("kind: the Kueue image %s: %w", kueueRef, err)
			}
			// The testkit's Kueue build reads its visibility and metrics
			// certificates from directories relative to its working
			// directory (assets.KueuePatches, for the local topology); in the
			// image they lead where the chart mounts them.
			links := map[string]string{
				"/" + assets.KueueVisibilityCertDir: "/visibility",
				"/" + assets.KueueMetricsCertDir:    "/etc/kueue/metrics/certs",
			}
			if err := nodeimage.EnsureControllerImage(ctx, no, kueueRef, bin.Path, links); err != nil {
				return fmt.Errorf("kind: %w", err)
			}
		}
	}
	if jobSetRef != "" && p.opts.JobSetImage == (install.Image{}) {
		if v, ok := releaseTag(jobSetRef); ok {
			op, err := assets.EnsureOperator(ctx, ao, assets.JobSetOperator(), v)
			if err != nil {
				return fmt.Errorf("kind: the JobSet image %s: %w", jobSetRef, err)
			}
			if err := nodeimage.EnsureControllerImage(ctx, no, jobSetRef, op.Path, nil); err != nil {
				return fmt.Errorf("kind: %w", err)
			}
		}
	}
	if err := nodeimage.EnsureJobImage(ctx, no, topology.DefaultJobImage); err != nil {
		return fmt.Errorf("kind: %w", err)
	}
	return nil
}

// releaseTag is the release an image's tag names ("…/kueue:v0.19.2" →
// v0.19.2); a digest or a non-release tag is not one.
func releaseTag(ref string) (string, bool) {
	if strings.Contains(ref, "@") {
		return "", false
	}
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return "", false
	}
	tag := ref[i+1:]
	return tag, semver.IsValid(tag) && semver.Prerelease(tag) == ""
}

// Prepare builds, with no test timeout running, what a kind topology with
// these options needs from this machine and could only pull: the offline
// node image (unless o.NodeImage names one) and the binaries of the Kueue
// (and, with the JobSet integration, JobSet) controller images, which
// Provision then imports in seconds. On a cold cache it compiles
// Kubernetes, Kueue and the node's tools from their modules: tens of
// minutes on 2 cores. Call it from TestMain, as the bundled examples do
// with MKTK_PROVIDER=kind, or run `mktk kind node` once. progress gets
// the builds' lines (nil: none).
func Prepare(ctx context.Context, o Options, progress io.Writer, integrations ...string) error {
	if progress == nil {
		progress = io.Discard
	}
	if o.NodeImage == "" {
		rt, err := Detect(ctx, o.Runtime)
		if err != nil {
			return err
		}
		if rt.Name != RuntimeDocker {
			return fmt.Errorf("kind: Options.NodeImage: empty, and the offline node image is built with docker only (runtime %s): name a node image", rt.Name)
		}
		if _, err := nodeimage.EnsureNode(ctx, nodeimage.Options{Docker: rt.CLI, Progress: progress}, ""); err != nil {
			return fmt.Errorf("kind: the offline node image: %w", err)
		}
	}
	if o.SkipImageLoad {
		return nil
	}
	ao := assets.Options{Progress: progress}
	bin, err := assets.EnsureKueue(ctx, ao, assets.KueueOptions{})
	if err != nil {
		return fmt.Errorf("kind: the Kueue image's binary: %w", err)
	}
	if slices.Contains(integrations, topology.IntegrationJobSet) {
		v, err := bin.RequiredVersion(assets.JobSetOperator().Module)
		if err != nil {
			return err
		}
		if _, err := assets.EnsureOperator(ctx, ao, assets.JobSetOperator(), v); err != nil {
			return fmt.Errorf("kind: the JobSet image's binary: %w", err)
		}
	}
	return nil
}
