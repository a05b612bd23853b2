package install

import (
	"context"
	"errors"
)

// ErrNoKubeRayChart is what KubeRay returns: the KubeRay operator's chart
// (helm-chart/kuberay-operator in the KubeRay repository) is not in the
// github.com/ray-project/kuberay/ray-operator module, whose zip holds the
// ray-operator/ directory only (checked for v1.6.0: no Chart.yaml anywhere
// in it). This package installs charts from pinned Go modules only, so it
// cannot install KubeRay; install the operator with its own chart or
// manifests.
var ErrNoKubeRayChart = errors.New("install: the KubeRay operator chart is not in the github.com/ray-project/kuberay/ray-operator Go module (it lives in the repository's helm-chart/ directory, outside the module); install KubeRay with its own chart")

// KubeRay reports ErrNoKubeRayChart; it exists so that callers find the
// reason where they look for it.
func KubeRay(context.Context) error { return ErrNoKubeRayChart }
