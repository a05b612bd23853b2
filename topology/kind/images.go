package kind

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/multikueue-testkit/testkit/internal/redact"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
)

// ImageLoad says what happened to one image.
type ImageLoad struct {
	// Image is the reference as the pods name it.
	Image string
	// Clusters are the topology clusters whose nodes got it (or had it
	// already).
	Clusters []string
	// NotLoaded, when not empty, says why the image was not loaded (absent
	// from the local runtime, SkipImageLoad): the nodes pull it from its
	// registry when a pod needs it.
	NotLoaded string
}

func (l ImageLoad) String() string {
	if l.NotLoaded != "" {
		return l.Image + ": not loaded (" + l.NotLoaded + ")"
	}
	return l.Image + ": loaded into " + strings.Join(l.Clusters, ", ")
}

// imagePlan is which images go to which clusters.
type imagePlan struct {
	// roles maps an image to the roles whose clusters get it.
	roles map[string][]topology.Role
}

func (p imagePlan) add(img string, roles ...topology.Role) {
	if _, ok := p.roles[img]; !ok {
		p.roles[img] = nil
	}
	for _, r := range roles {
		if !slices.Contains(p.roles[img], r) {
			p.roles[img] = append(p.roles[img], r)
		}
	}
}

func (p imagePlan) images() []string {
	out := make([]string, 0, len(p.roles))
	for img := range p.roles {
		out = append(out, img)
	}
	slices.Sort(out)
	return out
}

// forRole returns the images the clusters of role get.
func (p imagePlan) forRole(role topology.Role) []string {
	var out []string
	for _, img := range p.images() {
		if slices.Contains(p.roles[img], role) {
			out = append(out, img)
		}
	}
	return out
}

// planImages decides what each role's nodes need so that no pod pulls from
// a registry: the Kueue controller on every cluster, the JobSet controller on
// every cluster when the JobSet integration is on, and on the workers the
// image of the jobs the workload builders make (topology.DefaultJobImage) and
// Options.ExtraImages. Manager job objects are suspended (MultiKueue runs
// them on the workers), so the manager needs no job image.
func planImages(kueueRef, jobSetRef string, extra []string) imagePlan {
	p := imagePlan{roles: map[string][]topology.Role{}}
	p.add(kueueRef, topology.RoleManager, topology.RoleWorker)
	if jobSetRef != "" {
		p.add(jobSetRef, topology.RoleManager, topology.RoleWorker)
	}
	p.add(topology.DefaultJobImage, topology.RoleWorker)
	for _, img := range extra {
		p.add(img, topology.RoleWorker)
	}
	return p
}

// controllerImages are the Kueue (and JobSet, when jobSet) controller images
// as topology/install deploys them, read from its offline renders so that
// what is loaded is what the Deployments name.
func controllerImages(ctx context.Context, spec topology.Spec, needs topology.KueueNeeds, o Options, jobSet bool) (kueueRef, jobSetRef string, err error) {
	kr, err := install.RenderKueue(ctx, install.KueueOptions{Spec: spec, Needs: needs, Image: o.KueueImage})
	if err != nil {
		return "", "", fmt.Errorf("kind: Kueue's image: %w", err)
	}
	if kueueRef, err = imageRef(kr.Values, "controllerManager", "manager", "image"); err != nil {
		return "", "", fmt.Errorf("kind: Kueue chart values: %w", err)
	}
	if !jobSet {
		return kueueRef, "", nil
	}
	jr, err := install.RenderJobSet(ctx, install.JobSetOptions{Image: o.JobSetImage})
	if err != nil {
		return "", "", fmt.Errorf("kind: JobSet's image: %w", err)
	}
	if jobSetRef, err = imageRef(jr.Values, "image"); err != nil {
		return "", "", fmt.Errorf("kind: JobSet chart values: %w", err)
	}
	return kueueRef, jobSetRef, nil
}

// imageRef reads repository:tag from the chart values map at path.
func imageRef(values map[string]any, path ...string) (string, error) {
	cur := values
	for _, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return "", fmt.Errorf("no map at %s", strings.Join(path, "."))
		}
		cur = next
	}
	repo, _ := cur["repository"].(string)
	tag, _ := cur["tag"].(string)
	if repo == "" || tag == "" {
		return "", fmt.Errorf("%s: repository %q, tag %q", strings.Join(path, "."), repo, tag)
	}
	return repo + ":" + tag, nil
}

// localImage is an image present in the local runtime, saved to an archive.
type localImage struct {
	ref     string
	id      string
	archive string
}

// saveLocal looks up each image in the local runtime and saves the present
// ones into dir; the absent ones come back with the reason.
func saveLocal(ctx context.Context, rt Runtime, dir string, refs []string) (present map[string]localImage, missing map[string]string, err error) {
	present, missing = map[string]localImage{}, map[string]string{}
	for i, ref := range refs {
		out, err := exec.CommandContext(ctx, rt.CLI, "image", "inspect", "--format", "{{.Id}}", ref).Output()
		if err != nil {
			missing[ref] = fmt.Sprintf("not present in the local %s images (`%s image inspect`)", rt.Name, rt.Name)
			continue
		}
		archive := filepath.Join(dir, fmt.Sprintf("image-%d.tar", i))
		if out, err := exec.CommandContext(ctx, rt.CLI, "save", "-o", archive, ref).CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("kind: `%s save %s`: %v: %s", rt.Name, ref, err, redact.String(lastLine(out)))
		}
		present[ref] = localImage{ref: ref, id: strings.TrimSpace(string(out)), archive: archive}
	}
	return present, missing, nil
}

// loadInto loads img into every node of a cluster unless a node has the same
// image ID already (a reused cluster).
func loadInto(clusterName string, nodeList []nodes.Node, img localImage) error {
	for _, n := range nodeList {
		if id, err := nodeutils.ImageID(n, img.ref); err == nil && id != "" && id == img.id {
			continue
		}
		f, err := os.Open(img.archive)
		if err != nil {
			return err
		}
		err = nodeutils.LoadImageArchive(n, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("kind: cluster %q: loading image %s into node %s: %s", clusterName, img.ref, n.String(), redact.String(err.Error()))
		}
	}
	return nil
}
