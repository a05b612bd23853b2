package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/postrender"
	"helm.sh/helm/v3/pkg/registry"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
)

// chartSource is a chart inside a pinned Go module: the chart is read from
// the module cache at the version this binary links, never copied into this
// repository.
type chartSource struct {
	// name is the component ("kueue", "jobset") for messages.
	name string
	// module is the Go module path (modsrc.Kueue, ...).
	module string
	// dir is the chart's directory inside the module.
	dir string
}

func kueueChart() chartSource {
	return chartSource{name: "kueue", module: modsrc.Kueue, dir: "charts/kueue"}
}

func jobSetChart() chartSource {
	return chartSource{name: "jobset", module: modsrc.JobSet, dir: "charts/jobset"}
}

// loadedChart is a chart with the version of the module it came from (the
// released image tag).
type loadedChart struct {
	chart *chart.Chart
	// path is the chart directory.
	path string
	// moduleVersion is the Go module version ("v0.17.0"), or "" when the chart
	// came from an explicit directory.
	moduleVersion string
}

func (l *loadedChart) String() string {
	return fmt.Sprintf("%s %s (%s)", l.chart.Name(), l.chart.Metadata.Version, l.path)
}

// chartRef is a chart the caller names instead of the module's: a
// directory, or an OCI reference (oci://...) and whether to pull it over
// plain HTTP.
type chartRef struct {
	ref       string
	plainHTTP bool
}

// ociPrefix starts an OCI chart reference, as Helm spells it.
const ociPrefix = "oci://"

// load reads the chart named by override when it is set, else from the
// module.
func (s chartSource) load(ctx context.Context, override chartRef) (*loadedChart, error) {
	return s.loadVersion(ctx, override, "")
}

// loadVersion is load with the chart of module version at (the module
// source of that release, fetched from the module proxy when missing) when
// at is set and override is not.
func (s chartSource) loadVersion(ctx context.Context, override chartRef, at string) (*loadedChart, error) {
	if strings.HasPrefix(override.ref, ociPrefix) {
		return s.pull(override)
	}
	path, version := override.ref, ""
	if path == "" {
		var root string
		var err error
		if at != "" {
			root, err = modsrc.DirAt(ctx, s.module, at)
		} else {
			root, err = modsrc.Dir(ctx, s.module)
		}
		if err != nil {
			return nil, fmt.Errorf("install: locating the %s chart: %w", s.name, err)
		}
		path = filepath.Join(root, filepath.FromSlash(s.dir))
		if i := strings.LastIndex(root, "@"); i >= 0 {
			version = root[i+1:]
		}
	}
	ch, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("install: loading the %s chart from %s: %w", s.name, path, err)
	}
	return &loadedChart{chart: ch, path: path, moduleVersion: version}, nil
}

// pull fetches an OCI chart with Helm's registry client, as `helm pull`
// does, and loads it from the archive.
func (s chartSource) pull(r chartRef) (*loadedChart, error) {
	var opts []registry.ClientOption
	if r.plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("install: the %s chart %s: Helm's registry client: %w", s.name, r.ref, err)
	}
	res, err := rc.Pull(strings.TrimPrefix(r.ref, ociPrefix), registry.PullOptWithChart(true))
	if err != nil {
		return nil, fmt.Errorf("install: pulling the %s chart %s: %w", s.name, r.ref, err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
	if err != nil {
		return nil, fmt.Errorf("install: loading the %s chart pulled from %s: %w", s.name, r.ref, err)
	}
	return &loadedChart{chart: ch, path: r.ref + "@" + res.Manifest.Digest}, nil
}

// renderKubeVersion is the Kubernetes version offline rendering assumes: the
// minor of the Kubernetes binaries under test (v1.36).
const renderKubeVersion = "v1.36.0"

// render renders the chart offline (Helm's install action with DryRun and
// ClientOnly, as `helm template` does) and returns the manifest. includeCRDs
// adds the chart's crds/ directory (Kueue keeps its CRDs in templates/, so
// they are always rendered; JobSet keeps them in crds/).
func render(ch *chart.Chart, releaseName, namespace string, values map[string]any, includeCRDs bool, post postrender.PostRenderer) (string, error) {
	kv, err := chartutil.ParseKubeVersion(renderKubeVersion)
	if err != nil {
		return "", err
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun = true
	inst.ClientOnly = true
	inst.ReleaseName = releaseName
	inst.Namespace = namespace
	inst.KubeVersion = kv
	inst.IncludeCRDs = includeCRDs
	inst.PostRenderer = post
	rel, err := inst.Run(ch, values)
	if err != nil {
		return "", fmt.Errorf("install: rendering chart %s %s as release %q in namespace %q: %w", ch.Name(), ch.Metadata.Version, releaseName, namespace, err)
	}
	return rel.Manifest, nil
}

// decodeManifest splits a rendered manifest into objects, skipping empty
// documents.
func decodeManifest(manifest string) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("install: decoding the rendered manifest (object %d): %w", len(out)+1, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("install: rendered object %d has no kind or apiVersion", len(out)+1)
		}
		out = append(out, u)
	}
}
