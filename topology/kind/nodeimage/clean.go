package nodeimage

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// RemoveImages removes from the engine every image this package made —
// the mktk.local/ images (base, node, busybox) and the controller and job
// images tagged from them (by the source label, or sharing the busybox
// image's ID) — and returns their references. The archives in the cache
// stay, so the next run loads them instead of building. Images of the same
// names that this package did not make are left alone.
func RemoveImages(ctx context.Context, o Options) ([]string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	d := o.docker()
	out, err := d.run(ctx, nil, "image", "ls", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}")
	if err != nil {
		return nil, fmt.Errorf("nodeimage: listing images: %w", err)
	}
	ours := map[string]bool{} // image IDs under mktk.local/
	type image struct{ ref, id string }
	var all []image
	for _, l := range strings.Split(out, "\n") {
		ref, id, ok := strings.Cut(strings.TrimSpace(l), " ")
		if !ok || strings.HasSuffix(ref, ":<none>") {
			continue
		}
		all = append(all, image{ref, id})
		if strings.HasPrefix(ref, "mktk.local/") {
			ours[id] = true
		}
	}
	var removed []string
	for _, img := range all {
		mine := ours[img.id]
		if !mine {
			mine = d.label(ctx, img.ref, sourceLabel) != ""
		}
		if !mine || slices.Contains(removed, img.ref) {
			continue
		}
		if _, err := d.run(ctx, nil, "rmi", img.ref); err != nil {
			return removed, fmt.Errorf("nodeimage: removing %s: %w", img.ref, err)
		}
		removed = append(removed, img.ref)
	}
	return removed, nil
}
