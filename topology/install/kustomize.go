package install

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
)

// kustomization is an operator's manifests as its pinned module ships them
// when it ships no chart (the training-operator, the MPI operator, the
// AppWrapper controller, KubeRay): a kustomization directory. kustomize's
// krusty renders it with the namespace, image and replicas asked for, and
// the result becomes an in-memory chart (CRDs in crds/, everything else one
// template) that Helm installs, upgrades and uninstalls as a release like
// any chart's.
type kustomization struct {
	module string
	// dir is the kustomization inside the module.
	dir string
	// image is the controller image's name as the kustomization renders it
	// (what its images: transformer is matched by).
	image string
	// tag, when set, is the image tag from the module version where the
	// kustomization leaves it floating ("latest", or none).
	tag func(moduleVersion string) string
	// patches are kustomize patches of the operator's own, after it.
	patches []map[string]any
}

// kustomizedChart renders k from the pinned module into a chart named name
// for namespace ns, the controller image img (its zero fields keep the
// module's) and replicas of every Deployment.
func (k kustomization) chart(ctx context.Context, name, ns string, img Image, replicas int64) (*loadedChart, error) {
	root, err := modsrc.Dir(ctx, k.module)
	if err != nil {
		return nil, fmt.Errorf("install: locating the %s manifests: %w", name, err)
	}
	version := ""
	if i := strings.LastIndex(root, "@"); i >= 0 {
		version = root[i+1:]
	}
	if img.Tag == "" && img.Repository == "" && k.tag != nil {
		img.Tag = k.tag(version)
	}
	base := filepath.Join(root, filepath.FromSlash(k.dir))
	rendered, err := k.render(base, ns, img, replicas)
	if err != nil {
		return nil, fmt.Errorf("install: rendering the %s kustomization %s: %w", name, base, err)
	}
	crds, rest, err := splitCRDs(rendered)
	if err != nil {
		return nil, fmt.Errorf("install: the %s kustomization %s: %w", name, base, err)
	}
	ch := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: strings.TrimPrefix(cmp.Or(version, "v0.0.0"), "v"), AppVersion: version,
			Description: fmt.Sprintf("%s's kustomization %s, rendered by kustomize", k.module, k.dir)},
		Templates: []*chart.File{{Name: "templates/manifests.yaml", Data: []byte(`{{ .Files.Get "manifests.yaml" }}`)}},
		Files:     []*chart.File{{Name: "manifests.yaml", Data: rest}},
	}
	for i, c := range crds {
		ch.Files = append(ch.Files, &chart.File{Name: fmt.Sprintf("crds/%02d.yaml", i), Data: c})
	}
	if err := ch.Validate(); err != nil {
		return nil, fmt.Errorf("install: the chart made of the %s kustomization: %w", name, err)
	}
	return &loadedChart{chart: ch, path: base, moduleVersion: version}, nil
}

// render runs krusty on an overlay, written to a temporary directory and
// removed after, over base: the namespace, the image when img names one,
// every Deployment's replicas and, when img says, its first container's
// pull policy.
func (k kustomization) render(base, ns string, img Image, replicas int64) ([]byte, error) {
	patch := fmt.Sprintf(`[{"op": "add", "path": "/spec/replicas", "value": %d}`, replicas)
	if img.PullPolicy != "" {
		patch += fmt.Sprintf(`, {"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": %q}`, img.PullPolicy)
	}
	overlay := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"namespace":  ns,
		"patches":    append([]map[string]any{{"target": map[string]any{"kind": "Deployment"}, "patch": patch + "]"}}, k.patches...),
	}
	if img.Repository != "" || img.Tag != "" {
		im := map[string]any{"name": k.image}
		if img.Repository != "" {
			im["newName"] = img.Repository
		}
		if img.Tag != "" {
			im["newTag"] = img.Tag
		}
		overlay["images"] = []map[string]any{im}
	}
	dir, err := os.MkdirTemp("", "mktk-kustomize-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// kustomize takes a base directory by a relative path only.
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		return nil, err
	}
	overlay["resources"] = []string{filepath.ToSlash(rel)}
	raw, err := yaml.Marshal(overlay)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), raw, 0o600); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// splitCRDs separates a rendered kustomization's CustomResourceDefinitions
// (one document each) from the rest, and drops its Namespace objects: Helm
// creates the release's namespace.
func splitCRDs(rendered []byte) (crds [][]byte, rest []byte, err error) {
	objs, err := decodeManifest(string(rendered))
	if err != nil {
		return nil, nil, err
	}
	var b strings.Builder
	for _, o := range objs {
		raw, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, nil, err
		}
		switch o.GetKind() {
		case "CustomResourceDefinition":
			crds = append(crds, raw)
		case "Namespace":
		default:
			b.WriteString("---\n")
			b.Write(raw)
		}
	}
	return crds, []byte(b.String()), nil
}
