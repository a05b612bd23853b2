package install

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
	"github.com/multikueue-testkit/testkit/topology"
)

// OperatorOptions say what job operator to install and how: from its
// chart (JobSet, LeaderWorkerSet, the Kubeflow Trainer) or, where its
// module ships none, from its kustomization rendered into one (the
// training-operator, the MPI operator, the AppWrapper controller, KubeRay).
type OperatorOptions struct {
	// Namespace of the release and the controller; default the operator's
	// ("jobset-system", "lws-system", "kubeflow-system").
	Namespace string
	// ReleaseName names the Helm release (and the chart's fullname); default
	// the operator's ("jobset", "lws", "kubeflow-trainer").
	ReleaseName string
	// Image defaults to the operator's released image at the pinned module's
	// version, IfNotPresent (the charts' own defaults are staging or
	// floating tags).
	Image Image
	// Replicas of the controller; default 1.
	Replicas int
	// Chart is the chart to install instead of the one in the pinned
	// module: a directory or an OCI reference, as KueueOptions.Chart.
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

// OperatorRender is an operator's installation rendered offline.
type OperatorRender struct {
	Manifest string
	// Objects include the CRDs from the chart's crds/ directory.
	Objects []*unstructured.Unstructured
	Values  map[string]any
	Chart   string
}

// operator is how one operator's chart takes OperatorOptions.
type operator struct {
	// kind names the operator in messages ("JobSet"); field names its
	// options ("JobSetOptions").
	kind, field string
	chart       chartSource
	namespace   string
	release     string
	// image is the released image's repository.
	image string
	// values are the chart values for the release name, image and replicas.
	values func(name string, img Image, replicas int64) map[string]any
	// kustomize, for an operator whose module ships no chart, renders the
	// chart from the module's kustomization (its image, namespace and
	// replicas set there; no values).
	kustomize *kustomization
}

type operatorPlan struct {
	op      operator
	chart   *loadedChart
	name    string
	ns      string
	values  map[string]any
	timeout time.Duration
}

func planOperator(ctx context.Context, op operator, opts OperatorOptions) (*operatorPlan, error) {
	ns := cmp.Or(opts.Namespace, op.namespace)
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("install: %s.Namespace: %q: %s", op.field, ns, errs[0])
	}
	name := cmp.Or(opts.ReleaseName, op.release)
	if errs := validation.IsDNS1035Label(name + "-controller-manager"); len(errs) > 0 {
		return nil, fmt.Errorf("install: %s.ReleaseName: %q: %s", op.field, name, errs[0])
	}
	if opts.Replicas < 0 {
		return nil, fmt.Errorf("install: %s.Replicas: %d is negative", op.field, opts.Replicas)
	}
	timeout := cmp.Or(opts.Timeout, DefaultTimeout)
	if op.kustomize != nil && opts.Chart == "" {
		if len(opts.Values) > 0 {
			return nil, fmt.Errorf("install: %s.Values: the %s's manifests are a kustomization, which takes no values (set Image, Replicas or Namespace)", op.field, op.kind)
		}
		img := opts.Image
		img.PullPolicy = cmp.Or(img.PullPolicy, "IfNotPresent")
		ch, err := op.kustomize.chart(ctx, op.chart.name, ns, img, int64(cmp.Or(opts.Replicas, 1)))
		if err != nil {
			return nil, err
		}
		return &operatorPlan{op: op, chart: ch, name: name, ns: ns, values: map[string]any{}, timeout: timeout}, nil
	}
	ch, err := op.chart.load(ctx, chartRef{opts.Chart, opts.ChartPlainHTTP})
	if err != nil {
		return nil, err
	}
	if op.values == nil {
		return &operatorPlan{op: op, chart: ch, name: name, ns: ns, values: opts.Values, timeout: timeout}, nil
	}
	img := opts.Image
	img.Repository = cmp.Or(img.Repository, op.image)
	img.Tag = cmp.Or(img.Tag, ch.moduleVersion, ch.chart.Metadata.AppVersion, "v"+ch.chart.Metadata.Version)
	img.PullPolicy = cmp.Or(img.PullPolicy, "IfNotPresent")
	values := op.values(name, img, int64(cmp.Or(opts.Replicas, 1)))
	mergeValues(values, opts.Values)
	return &operatorPlan{op: op, chart: ch, name: name, ns: ns, values: values, timeout: timeout}, nil
}

// renderOperator renders op's chart offline, CRDs included.
func renderOperator(ctx context.Context, op operator, opts OperatorOptions) (*OperatorRender, error) {
	p, err := planOperator(ctx, op, opts)
	if err != nil {
		return nil, err
	}
	manifest, err := render(p.chart.chart, p.name, p.ns, p.values, true, nil)
	if err != nil {
		return nil, err
	}
	objs, err := decodeManifest(manifest)
	if err != nil {
		return nil, err
	}
	return &OperatorRender{Manifest: manifest, Objects: objs, Values: p.values, Chart: p.chart.chart.Name() + "-" + p.chart.chart.Metadata.Version}, nil
}

// installOperator installs op on cluster with Helm, or upgrades the
// release when it exists, then waits until its Deployment is Available and
// its webhook Service has a ready endpoint. Helm installs the CRDs from the
// chart's crds/ directory on the first install only, and neither upgrades
// nor deletes them. Once Helm has run, the Release comes back also with an
// error.
func installOperator(ctx context.Context, cluster *topology.Cluster, op operator, opts OperatorOptions) (*Release, error) {
	if err := checkCluster(cluster); err != nil {
		return nil, err
	}
	start := time.Now()
	p, err := planOperator(ctx, op, opts)
	if err != nil {
		return nil, err
	}
	progress := progressTo(opts.Progress)
	fmt.Fprintf(progress, "install: cluster %q: %s from chart %s\n", cluster.Name, op.kind, p.chart)
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
	fmt.Fprintf(progress, "install: cluster %q: %s ready in %s (%s)\n", cluster.Name, op.kind, time.Since(start).Round(100*time.Millisecond), rel)
	return rel, nil
}

// Released images of the operators installed from their charts.
const (
	LWSImage     = "registry.k8s.io/lws/lws"
	TrainerImage = "ghcr.io/kubeflow/trainer/trainer-controller-manager"
)

func lwsOperator() operator {
	return operator{kind: "LeaderWorkerSet", field: "LWSOptions", chart: chartSource{name: "lws", module: modsrc.LWS, dir: "charts/lws"},
		namespace: "lws-system", release: "lws", image: LWSImage,
		values: func(name string, img Image, replicas int64) map[string]any {
			return map[string]any{
				"fullnameOverride": name,
				"image":            map[string]any{"manager": map[string]any{"repository": img.Repository, "tag": img.Tag, "pullPolicy": img.PullPolicy}},
				"replicaCount":     replicas,
			}
		}}
}

// trainerOperator installs the Trainer without the JobSet its chart can
// bundle (a subchart the module does not vendor): install JobSet with
// JobSet first.
func trainerOperator() operator {
	return operator{kind: "Kubeflow Trainer", field: "TrainerOptions", chart: chartSource{name: "kubeflow-trainer", module: modsrc.Trainer, dir: "charts/kubeflow-trainer"},
		namespace: "kubeflow-system", release: "kubeflow-trainer", image: TrainerImage,
		values: func(name string, img Image, replicas int64) map[string]any {
			registry, repo := splitRegistry(img.Repository)
			return map[string]any{
				"fullnameOverride": name,
				"jobset":           map[string]any{"install": false},
				"image":            map[string]any{"registry": registry, "repository": repo, "tag": img.Tag, "pullPolicy": img.PullPolicy},
				"manager":          map[string]any{"replicas": replicas},
			}
		}}
}

// LWSOptions say what LeaderWorkerSet controller to install and how.
type LWSOptions = OperatorOptions

// TrainerOptions say what Kubeflow Trainer to install and how.
type TrainerOptions = OperatorOptions

// RenderLWS renders the chart of the pinned LeaderWorkerSet module
// (charts/lws) offline, CRDs included, with the released image
// (LWSImage:<module version>).
func RenderLWS(ctx context.Context, opts LWSOptions) (*OperatorRender, error) {
	return renderOperator(ctx, lwsOperator(), opts)
}

// LWS installs the LeaderWorkerSet controller on cluster with Helm from the
// chart of the pinned module, as JobSet installs JobSet's.
func LWS(ctx context.Context, cluster *topology.Cluster, opts LWSOptions) (*Release, error) {
	return installOperator(ctx, cluster, lwsOperator(), opts)
}

// RenderTrainer renders the chart of the pinned Kubeflow Trainer module
// (charts/kubeflow-trainer) offline, CRDs included, with the released image
// (TrainerImage:<module version>) and without its JobSet subchart.
func RenderTrainer(ctx context.Context, opts TrainerOptions) (*OperatorRender, error) {
	return renderOperator(ctx, trainerOperator(), opts)
}

// Trainer installs the Kubeflow Trainer on cluster with Helm from the chart
// of the pinned module, as JobSet installs JobSet's. Its TrainJobs run as
// JobSets: install JobSet on the cluster too (the chart's bundled JobSet is
// off).
func Trainer(ctx context.Context, cluster *topology.Cluster, opts TrainerOptions) (*Release, error) {
	return installOperator(ctx, cluster, trainerOperator(), opts)
}

// splitRegistry splits an image repository into the registry and the rest,
// as charts that take them apart want ("ghcr.io", "kubeflow/trainer/…"); a
// repository without a registry host is Docker Hub's ("docker.io", which
// such charts leave out of the image).
func splitRegistry(repo string) (registry, rest string) {
	host, path, ok := strings.Cut(repo, "/")
	if ok && (strings.ContainsAny(host, ".:") || host == "localhost") {
		return host, path
	}
	return "docker.io", repo
}
