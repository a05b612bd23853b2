package install

import (
	"encoding/json"
	"fmt"
	"sort"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/utils/ptr"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/yaml"
)

// managerConfig is the Kueue Configuration a chart installation runs, split
// the way the chart takes it.
type managerConfig struct {
	// yaml is managerConfig.controllerManagerConfigYaml.
	yaml string
	// parsed is yaml read back (no defaults applied).
	parsed configapi.Configuration
	// featureGates go to controllerManager.featureGates (the --feature-gates
	// flag), sorted by name.
	featureGates []featureGate
}

type featureGate struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
}

// buildManagerConfig turns the in-process configuration (Spec.KueueConfiguration,
// what the local topology loads) into the chart's manager configuration:
//
//   - every top-level key the in-process configuration sets replaces the
//     chart default's (namespace, integrations, multiKueue with its
//     clusterProfile credentials providers, manageJobsWithoutQueueName);
//   - the chart default's other keys stay (health and metrics addresses,
//     webhook port, leader election with its Lease name, controller
//     concurrency, client QPS): a Deployment needs them, an in-process Kueue
//     does not;
//   - internal certificate management is on, with the chart's webhook
//     Service and Secret names (fullname-webhook-service,
//     fullname-webhook-server-cert): a Deployment has no certificates
//     handed to it;
//   - feature gates move to the chart's controllerManager.featureGates list,
//     which the chart renders as --feature-gates: Kueue refuses gates given
//     both on the command line and in the configuration
//     (pkg/config.ValidateFeatureGates), and the chart reads the list for
//     its own decisions.
func buildManagerConfig(ch *chart.Chart, cfg configapi.Configuration, fullname string) (*managerConfig, error) {
	def, err := chartDefaultConfig(ch)
	if err != nil {
		return nil, err
	}
	mc := &managerConfig{}
	for name, on := range cfg.FeatureGates {
		mc.featureGates = append(mc.featureGates, featureGate{Name: name, Enabled: on})
	}
	sort.Slice(mc.featureGates, func(i, j int) bool { return mc.featureGates[i].Name < mc.featureGates[j].Name })
	cfg.FeatureGates = nil
	cfg.InternalCertManagement = &configapi.InternalCertManagement{
		Enable:             ptr.To(true),
		WebhookServiceName: ptr.To(fullname + "-webhook-service"),
		WebhookSecretName:  ptr.To(fullname + "-webhook-server-cert"),
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("install: encoding the Kueue configuration: %w", err)
	}
	var own map[string]any
	if err := json.Unmarshal(raw, &own); err != nil {
		return nil, err
	}
	for k, v := range own {
		if v = prune(v); v != nil {
			def[k] = v
		}
	}
	out, err := yaml.Marshal(def)
	if err != nil {
		return nil, fmt.Errorf("install: encoding the Kueue configuration: %w", err)
	}
	mc.yaml = string(out)
	if err := yaml.UnmarshalStrict(out, &mc.parsed); err != nil {
		return nil, fmt.Errorf("install: the merged Kueue configuration does not read back as %s: %w", configapi.SchemeGroupVersion, err)
	}
	return mc, nil
}

// chartDefaultConfig is the chart's default controllerManagerConfigYaml
// (values.yaml) as a map.
func chartDefaultConfig(ch *chart.Chart) (map[string]any, error) {
	mcv, _ := ch.Values["managerConfig"].(map[string]any)
	s, _ := mcv["controllerManagerConfigYaml"].(string)
	if s == "" {
		return nil, fmt.Errorf("install: chart %s %s has no managerConfig.controllerManagerConfigYaml in its values.yaml; not a Kueue chart this package knows", ch.Name(), ch.Metadata.Version)
	}
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("install: chart %s %s: managerConfig.controllerManagerConfigYaml: %w", ch.Name(), ch.Metadata.Version, err)
	}
	return m, nil
}

// prune drops empty maps and lists (and nils) recursively, so that fields the
// in-process configuration leaves unset do not override the chart's.
func prune(v any) any {
	switch t := v.(type) {
	case nil:
		return nil
	case map[string]any:
		for k, e := range t {
			if p := prune(e); p == nil {
				delete(t, k)
			} else {
				t[k] = p
			}
		}
		if len(t) == 0 {
			return nil
		}
		return t
	case []any:
		if len(t) == 0 {
			return nil
		}
		return t
	default:
		return v
	}
}

// KueueConfig is the manager configuration the Kueue chart in chartDir
// (charts/kueue of a Kueue source tree of any version) carries for cfg, as
// Kueue() would install it: the chart's default configuration with every
// top-level key that cfg sets in its place, and the feature gates split out
// (the chart passes them as --feature-gates). It returns the configuration
// as the chart's ConfigMap holds it (YAML, keys the chart knows and this
// package does not are kept) and the gates. The local topology runs the
// Kueue binary with it, so that a local Kueue and a chart-installed one of
// the same version start from the same configuration.
func KueueConfig(chartDir string, cfg configapi.Configuration) (string, map[string]bool, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", nil, fmt.Errorf("install: loading the kueue chart from %s: %w", chartDir, err)
	}
	mc, err := buildManagerConfig(ch, cfg, defaultKueueRelease)
	if err != nil {
		return "", nil, err
	}
	gates := map[string]bool{}
	for _, g := range mc.featureGates {
		gates[g.Name] = g.Enabled
	}
	return mc.yaml, gates, nil
}
