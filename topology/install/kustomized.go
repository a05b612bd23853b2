package install

import (
	"context"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
	"github.com/multikueue-testkit/testkit/topology"
)

// The operators whose pinned modules ship a kustomization and no chart:
// each is rendered from it (kustomization) into an in-memory chart that
// Helm installs. Their image is the one the module's manifests name unless
// OperatorOptions.Image says otherwise; Values do not apply.
//
// The training-operator's manifests carry an MPIJob v1 CRD of the name the
// MPI operator's v2beta1 CRD has, and its controller runs every scheme:
// as Kueue's own e2e does (test/e2e/config/multikueue/kubeflow-manifest-patch,
// training-operator issues 1930 and 1777), that CRD is dropped and every
// scheme but MPIJob enabled, so that the MPI operator runs MPIJobs beside it.
func trainingOperator() operator {
	return operator{kind: "training-operator", field: "TrainingOperatorOptions", chart: chartSource{name: "training-operator", module: modsrc.TrainingOperator},
		namespace: "kubeflow", release: "training-operator",
		kustomize: &kustomization{module: modsrc.TrainingOperator, dir: "manifests/overlays/standalone", image: "ghcr.io/kubeflow/training-v1/training-operator",
			patches: []map[string]any{
				{"target": map[string]any{"kind": "CustomResourceDefinition", "name": "mpijobs.kubeflow.org"},
					"patch": "$patch: delete\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: mpijobs.kubeflow.org\n"},
				{"target": map[string]any{"kind": "Deployment", "name": "training-operator"},
					"patch": `[{"op": "add", "path": "/spec/template/spec/containers/0/args", "value": ["--enable-scheme=tfjob", "--enable-scheme=pytorchjob", "--enable-scheme=xgboostjob", "--enable-scheme=paddlejob", "--enable-scheme=jaxjob"]}]`},
			}}}
}

func mpiOperator() operator {
	return operator{kind: "MPI operator", field: "MPIOperatorOptions", chart: chartSource{name: "mpi-operator", module: modsrc.MPIOperator},
		namespace: "mpi-operator", release: "mpi-operator",
		kustomize: &kustomization{module: modsrc.MPIOperator, dir: "manifests/overlays/standalone", image: "mpioperator/mpi-operator"}}
}

// appWrapperOperator: the module's kustomization names its image without a
// tag (latest); the module's version is the released tag.
func appWrapperOperator() operator {
	return operator{kind: "AppWrapper controller", field: "AppWrapperOptions", chart: chartSource{name: "appwrapper", module: modsrc.AppWrapper},
		namespace: "appwrapper-system", release: "appwrapper",
		kustomize: &kustomization{module: modsrc.AppWrapper, dir: "config/default", image: "quay.io/ibm/appwrapper", tag: func(v string) string { return v }}}
}

// kubeRayOperator: KubeRay's chart lives in its repository's helm-chart/
// directory, outside the github.com/ray-project/kuberay/ray-operator module
// (whose zip holds ray-operator/ only); the module's config/default
// kustomization is what it ships, installing into "default" unless told.
func kubeRayOperator() operator {
	return operator{kind: "KubeRay operator", field: "KubeRayOptions", chart: chartSource{name: "kuberay-operator", module: modsrc.KubeRay},
		namespace: "ray-system", release: "kuberay-operator",
		kustomize: &kustomization{module: modsrc.KubeRay, dir: "config/default", image: "quay.io/kuberay/operator"}}
}

// TrainingOperatorOptions say what Kubeflow training-operator to install
// and how (namespace "kubeflow", as its standalone manifests).
type TrainingOperatorOptions = OperatorOptions

// MPIOperatorOptions say what MPI operator to install and how (namespace
// "mpi-operator", as its standalone manifests).
type MPIOperatorOptions = OperatorOptions

// AppWrapperOptions say what AppWrapper controller to install and how
// (namespace "appwrapper-system").
type AppWrapperOptions = OperatorOptions

// KubeRayOptions say what KubeRay operator to install and how (namespace
// "ray-system").
type KubeRayOptions = OperatorOptions

// RenderTrainingOperator renders the pinned training-operator module's
// standalone kustomization (manifests/overlays/standalone) offline, CRDs
// included.
func RenderTrainingOperator(ctx context.Context, opts TrainingOperatorOptions) (*OperatorRender, error) {
	return renderOperator(ctx, trainingOperator(), opts)
}

// TrainingOperator installs the Kubeflow training-operator on cluster from
// its pinned module's standalone kustomization, through Helm as JobSet
// installs JobSet's chart, and waits until it is ready.
func TrainingOperator(ctx context.Context, cluster *topology.Cluster, opts TrainingOperatorOptions) (*Release, error) {
	return installOperator(ctx, cluster, trainingOperator(), opts)
}

// RenderMPIOperator renders the pinned MPI operator module's standalone
// kustomization (manifests/overlays/standalone) offline, CRD included.
func RenderMPIOperator(ctx context.Context, opts MPIOperatorOptions) (*OperatorRender, error) {
	return renderOperator(ctx, mpiOperator(), opts)
}

// MPIOperator installs the MPI operator on cluster from its pinned module's
// standalone kustomization, as TrainingOperator does.
func MPIOperator(ctx context.Context, cluster *topology.Cluster, opts MPIOperatorOptions) (*Release, error) {
	return installOperator(ctx, cluster, mpiOperator(), opts)
}

// RenderAppWrapper renders the pinned AppWrapper module's kustomization
// (config/default: its webhooks with their internal certificates) offline,
// CRD included, the image tagged with the module's version.
func RenderAppWrapper(ctx context.Context, opts AppWrapperOptions) (*OperatorRender, error) {
	return renderOperator(ctx, appWrapperOperator(), opts)
}

// AppWrapper installs the AppWrapper controller on cluster from its pinned
// module's kustomization, as TrainingOperator does.
func AppWrapper(ctx context.Context, cluster *topology.Cluster, opts AppWrapperOptions) (*Release, error) {
	return installOperator(ctx, cluster, appWrapperOperator(), opts)
}

// RenderKubeRay renders the pinned KubeRay module's kustomization
// (ray-operator's config/default) offline, CRDs included.
func RenderKubeRay(ctx context.Context, opts KubeRayOptions) (*OperatorRender, error) {
	return renderOperator(ctx, kubeRayOperator(), opts)
}

// KubeRay installs the KubeRay operator on cluster from its pinned module's
// kustomization, as TrainingOperator does (its chart is not in the module).
func KubeRay(ctx context.Context, cluster *topology.Cluster, opts KubeRayOptions) (*Release, error) {
	return installOperator(ctx, cluster, kubeRayOperator(), opts)
}
