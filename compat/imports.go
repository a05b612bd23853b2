// Package compat builds the testkit's provider-independent packages in a
// module on newer Kubernetes pins than the testkit's own: those of
// Cluster API Provider Azure's e2e module (Go 1.26, k8s.io/* v0.36.3,
// sigs.k8s.io/controller-runtime v0.24.1). CI runs
// `(cd compat && go build ./... && go vet ./...)`; a failure means a user
// on those pins could not import the package.
//
// Not built here: topology/local (its in-process Kueue pulls
// github.com/kubeflow/trainer/v2 v2.2.0, which does not build against
// k8s.io/* v0.36) and anything importing it (scenario/envfuncs/localenv),
// and sigs.k8s.io/cluster-api/test v1.14.x (CAPI's test framework, which
// CAPZ uses; it cannot be resolved from this machine's module proxy), so
// topology/existing.ClusterProxy is not checked against CAPI's own type.
//
// topology/install brings the Helm SDK at the testkit's pin (v3.20.2), whose
// k8s.io/kubectl v0.35.3 does not build against k8s.io/api v0.36; kubectl and
// cli-runtime are pinned to v0.36.3 too, as a module on these pins would
// have them. Helm v3.21.4 (the line for k8s 0.36) builds here as well.
//
// topology/kind brings sigs.k8s.io/kind v0.33.0, whose own dependencies are
// light (no k8s.io module); it builds here as is.
//
// topology/capz handles CAPI objects as unstructured ones, so no
// sigs.k8s.io/cluster-api module is in the build list; topology/capz/capztest
// (its simulated CAPI/CAPZ controller) runs a controller-runtime manager,
// which adds fsnotify and gomodules.xyz/jsonpatch.
package compat

import (
	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/scenario/envfuncs"
	"github.com/multikueue-testkit/testkit/scenario/report"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/capz"
	"github.com/multikueue-testkit/testkit/topology/capz/capztest"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/install"
	"github.com/multikueue-testkit/testkit/topology/kind"
	"github.com/multikueue-testkit/testkit/workload"
)

// One exported symbol of each package, so that an API a CAPZ or Kueue test
// calls is type-checked against these pins, not only its package's imports.
var (
	_ = topology.New
	_ = existing.New
	_ = existing.Proxy
	_ = capz.New
	_ = capz.Attach
	_ = capztest.Start
	_ = install.Kueue
	_ = install.JobSet
	_ = kind.New
	_ = kind.FromKubeconfigs
	_ = connect.WorkerRules
	_ = workload.NewJob
	_ = workload.NewJobSet
	_ = observe.Start
	_ = assert.For
	_ = scenario.Observe
	_ = scenario.DispatchJobs
	_ = scenario.Classify
	_ = report.Scale
	_ = report.NewValidator
	_ = envfuncs.SetupTopology
)

var _ topology.Connector = connect.KubeconfigSecret{}
