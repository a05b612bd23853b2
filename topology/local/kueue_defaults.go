package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
)

// kueueManagerConfigFile is the Configuration Kueue ships for its manager,
// in the Kueue module: the release manifests and the Helm chart run it.
const kueueManagerConfigFile = "config/components/manager/controller_manager_config.yaml"

// kueueManagerController is the controller section of the pinned Kueue's
// shipped manager configuration: groupKindConcurrency, five reconciles at a
// time for Jobs, Pods and Workloads in v0.17.0. Left unset, as Kueue's
// config.Load leaves it, controller-runtime runs every controller one
// reconcile at a time, which is not how Kueue runs anywhere else.
func kueueManagerController(ctx context.Context) (*configapi.ControllerConfigurationSpec, error) {
	root, err := modsrc.Dir(ctx, modsrc.Kueue)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, kueueManagerConfigFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("local: Kueue's manager configuration: %w", err)
	}
	var cfg configapi.Configuration
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("local: reading %s: %w", path, err)
	}
	if cfg.Controller == nil || len(cfg.Controller.GroupKindConcurrency) == 0 {
		return nil, fmt.Errorf("local: %s has no controller.groupKindConcurrency; not a Kueue manager configuration this package knows", path)
	}
	return cfg.Controller, nil
}
