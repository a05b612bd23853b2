package install

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/multikueue-testkit/testkit/topology"
)

// JobSetOptions say what JobSet controller to install and how.
type JobSetOptions struct {
	// Namespace of the release and the controller; default "jobset-system".
	Namespace string
	// ReleaseName names the Helm release (and the chart's fullname); default
	// "jobset".
	ReleaseName string
	// Image defaults to the released image of the pinned JobSet,
	// registry.k8s.io/jobset/jobset:<module version>, IfNotPresent (the
	// chart's own default is a staging image pulled Always).
	Image Image
	// Replicas of the controller; default 1.
	Replicas int
	// Chart is the chart to install instead of charts/jobset of the pinned
	// JobSet module: a directory or an OCI reference, as KueueOptions.Chart.
	Chart string
	// ChartPlainHTTP pulls an OCI Chart over plain HTTP.
	ChartPlainHTTP bool
	// Values are merged over the values computed here and win.
	Values map[string]any
	// TakeOwnership lets Helm adopt existing objects of the chart.
	TakeOwnership bool
	// Timeout bounds the Helm operation and each readiness wait; default
	// DefaultTimeout.
	Timeout time.Duration
	// Progress receives one line per step; nil discards.
	Progress io.Writer
}

// JobSetRender is a JobSet installation rendered offline.
type JobSetRender struct {
	Manifest string
	// Objects include the CRD from the chart's crds/ directory.
	Objects []*unstructured.Unstructured
	Values  map[string]any
	Chart   string
}

type jobSetPlan struct {
	chart   *loadedChart
	name    string
	ns      string
	values  map[string]any
	timeout time.Duration
}

func planJobSet(ctx context.Context, opts JobSetOptions) (*jobSetPlan, error) {
	ns := cmp.Or(opts.Namespace, "jobset-system")
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("install: JobSetOptions.Namespace: %q: %s", ns, errs[0])
	}
	name := cmp.Or(opts.ReleaseName, "jobset")
	if errs := validation.IsDNS1035Label(name + "-controller-manager"); len(errs) > 0 {
		return nil, fmt.Errorf("install: JobSetOptions.ReleaseName: %q: %s", name, errs[0])
	}
	if opts.Replicas < 0 {
		return nil, fmt.Errorf("install: JobSetOptions.Replicas: %d is negative", opts.Replicas)
	}
	ch, err := jobSetChart().load(ctx, chartRef{opts.Chart, opts.ChartPlainHTTP})
	if err != nil {
		return nil, err
	}
	img := opts.Image
	img.Repository = cmp.Or(img.Repository, JobSetImage)
	img.Tag = cmp.Or(img.Tag, ch.moduleVersion, ch.chart.Metadata.AppVersion, "v"+ch.chart.Metadata.Version)
	img.PullPolicy = cmp.Or(img.PullPolicy, "IfNotPresent")
	values := map[string]any{
		"fullnameOverride": name,
		"image":            map[string]any{"repository": img.Repository, "tag": img.Tag, "pullPolicy": img.PullPolicy},
		"controller":       map[string]any{"replicas": int64(cmp.Or(opts.Replicas, 1))},
	}
	mergeValues(values, opts.Values)
	return &jobSetPlan{chart: ch, name: name, ns: ns, values: values, timeout: cmp.Or(opts.Timeout, DefaultTimeout)}, nil
}

// RenderJobSet renders the JobSet chart offline, CRD included.
func RenderJobSet(ctx context.Context, opts JobSetOptions) (*JobSetRender, error) {
	p, err := planJobSet(ctx, opts)
	if err != nil {
		return nil, err
	}
	manifest, err := render(p.chart.chart, p.name, p.ns, p.values, true)
	if err != nil {
		return nil, err
	}
	objs, err := decodeManifest(manifest)
	if err != nil {
		return nil, err
	}
	return &JobSetRender{Manifest: manifest, Objects: objs, Values: p.values, Chart: p.chart.chart.Name() + "-" + p.chart.chart.Metadata.Version}, nil
}

// JobSet installs the JobSet controller on cluster with Helm from the chart
// of the pinned JobSet module, or upgrades the release when it exists, then
// waits until its Deployment is Available and its webhook Service has a
// ready endpoint. Helm installs the CRD from the chart's crds/ directory on
// the first install only, and neither upgrades nor deletes it. Once Helm has
// run, the Release comes back also with an error.
func JobSet(ctx context.Context, cluster *topology.Cluster, opts JobSetOptions) (*Release, error) {
	if err := checkCluster(cluster); err != nil {
		return nil, err
	}
	start := time.Now()
	p, err := planJobSet(ctx, opts)
	if err != nil {
		return nil, err
	}
	progress := progressTo(opts.Progress)
	fmt.Fprintf(progress, "install: cluster %q: JobSet from chart %s\n", cluster.Name, p.chart)
	cl, err := readyClient(cluster)
	if err != nil {
		return nil, err
	}
	rel, err := installOrUpgrade(ctx, releaseRequest{
		cluster: cluster, chart: p.chart, name: p.name, namespace: p.ns, values: p.values,
		takeOwnership: opts.TakeOwnership, timeout: p.timeout, progress: progress,
	})
	if err != nil {
		return nil, err
	}
	w := &waiter{cluster: cluster, client: cl, timeout: p.timeout, progress: progress}
	if err := w.workloadsReady(ctx, rel); err != nil {
		return rel, err
	}
	fmt.Fprintf(progress, "install: cluster %q: JobSet ready in %s (%s)\n", cluster.Name, time.Since(start).Round(100*time.Millisecond), rel)
	return rel, nil
}
