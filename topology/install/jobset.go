package install

import (
	"context"

	"github.com/multikueue-testkit/testkit/topology"
)

// JobSetOptions say what JobSet controller to install and how: namespace
// "jobset-system", release "jobset" and the released image
// JobSetImage:<module version> unless they say otherwise.
type JobSetOptions = OperatorOptions

// JobSetRender is a JobSet installation rendered offline.
type JobSetRender = OperatorRender

func jobSetOperator() operator {
	return operator{kind: "JobSet", field: "JobSetOptions", chart: jobSetChart(), namespace: "jobset-system", release: "jobset", image: JobSetImage,
		values: func(name string, img Image, replicas int64) map[string]any {
			return map[string]any{
				"fullnameOverride": name,
				"image":            map[string]any{"repository": img.Repository, "tag": img.Tag, "pullPolicy": img.PullPolicy},
				"controller":       map[string]any{"replicas": replicas},
			}
		}}
}

// RenderJobSet renders the JobSet chart offline, CRD included.
func RenderJobSet(ctx context.Context, opts JobSetOptions) (*JobSetRender, error) {
	return renderOperator(ctx, jobSetOperator(), opts)
}

// JobSet installs the JobSet controller on cluster with Helm from the chart
// of the pinned JobSet module, or upgrades the release when it exists, then
// waits until its Deployment is Available and its webhook Service has a
// ready endpoint. Helm installs the CRD from the chart's crds/ directory on
// the first install only, and neither upgrades nor deletes it. Once Helm has
// run, the Release comes back also with an error.
func JobSet(ctx context.Context, cluster *topology.Cluster, opts JobSetOptions) (*Release, error) {
	return installOperator(ctx, cluster, jobSetOperator(), opts)
}
