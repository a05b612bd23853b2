package topology

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/semver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/yaml"
)

// Where a deployed Kueue keeps its Configuration: the names Kueue's Helm
// chart and kustomize manifests use (release "kueue"). ReadKueueFacts finds
// other names through the Deployment's --config argument and volumes.
const (
	KueueConfigMapName  = "kueue-manager-config"
	KueueConfigKey      = "controller_manager_config.yaml"
	KueueDeploymentName = "kueue-controller-manager"
)

// KueueVersionAnnotation, on the ConfigMap the local topology publishes for
// its Kueue process, is the version that process reported when it started
// (the gitVersion cmd/kueue logs).
const KueueVersionAnnotation = "testkit.multikueue.io/kueue-version"

// KueueFacts is Kueue's configuration as a cluster runs it, read from the
// cluster (ReadKueueFacts), with Kueue's own defaults applied. The assertions
// judge with these values, not with what a test restated in Options.
type KueueFacts struct {
	Namespace         string
	Origin            string
	Dispatcher        string
	GCInterval        time.Duration
	WorkerLostTimeout time.Duration
	Integrations      []string
	// FeatureGates are the gates set explicitly: the Configuration's
	// featureGates and the Deployment's --feature-gates argument. A gate not
	// listed has Kueue's default.
	FeatureGates map[string]bool
	// CredentialsProviders are multiKueue.clusterProfile.credentialsProviders
	// as Kueue runs them (the local topology adds KUBECONFIG to each exec
	// plugin's env), to rebuild the rest config Kueue builds for a
	// ClusterProfile. Empty when not read from the cluster.
	CredentialsProviders []configapi.ClusterProfileCredentialsProvider
	// IncrementalStepSize is multiKueue.incrementalDispatcherConfig.stepSize
	// (Kueue v0.19+, honoured with gate MultiKueueIncrementalDispatcherConfig);
	// 0 when not set.
	IncrementalStepSize int
	// Version is the Kueue release the cluster runs ("v0.19.2"): the
	// version its process reported (KueueVersionAnnotation), else the tag
	// of the Deployment's Kueue image; "" when neither tells (an image by
	// digest, Kueue run another way): rules that differ by version then say
	// which one they assumed.
	Version string
	// NominationPolicy is the MutatingAdmissionPolicy that clears
	// status.nominatedClusterNames when a Workload is admitted or evicted
	// (Kueue v0.19.2's chart installs "<release>-clear-nominated-cluster-names"
	// with enableMutatingAdmissionPolicy, off by default; #14643); "" when the
	// cluster has none. NominationPolicyRead is false when the policies
	// could not be listed (no permission); NominationPolicyNote says what
	// was found ("admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
	// not served", ...).
	NominationPolicy     string
	NominationPolicyRead bool
	NominationPolicyNote string
	// Source says where the facts were read, for reports: "ConfigMap
	// kueue-system/kueue-manager-config (Deployment
	// kueue-system/kueue-controller-manager)".
	Source string
	// Assumed holds the facts that were neither read from the cluster nor
	// given (in Options or a Configuration handed over), by name (FactGCInterval,
	// ...), each with why and what was assumed instead; empty when every fact
	// was read or given. Say writes a fact for a failure message, marked when
	// it was assumed.
	Assumed map[string]string
}

// Names of the facts KueueFacts.Assumed and Say know.
const (
	FactNamespace         = "namespace"
	FactOrigin            = "origin"
	FactDispatcher        = "dispatcher"
	FactGCInterval        = "gcInterval"
	FactWorkerLostTimeout = "workerLostTimeout"
	FactIntegrations      = "integrations"
	FactFeatureGates      = "featureGates"
)

// Say writes fact and its value for a message: "gcInterval 1m0s", or, when
// the value was not read from the cluster nor given, "gcInterval 1m0s
// (unknown: Kueue's default assumed; ...)".
func (f KueueFacts) Say(fact string, value any) string {
	s := fmt.Sprintf("%s %v", fact, value)
	if why, ok := f.Assumed[fact]; ok {
		s += " (unknown: " + why + ")"
	}
	return s
}

// FactsFromConfigurationObject is FactsFromConfiguration for a Configuration
// object: the one a harness that runs Kueue in-process hands over.
func FactsFromConfigurationObject(cfg *configapi.Configuration, source string) (KueueFacts, error) {
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return KueueFacts{}, fmt.Errorf("%s: %w", source, err)
	}
	return FactsFromConfiguration(raw, source)
}

// NotReadable is the error of ReadKueueFacts when the cluster does not show
// how its Kueue is configured: no Deployment with a --config argument and no
// ConfigMap kueue-manager-config in Kueue's namespace (Kueue run some other
// way, or no permission to read them).
type NotReadable struct {
	Cluster, Namespace string
	Reason             string
}

func (e *NotReadable) Error() string {
	return fmt.Sprintf("cluster %q: Kueue's configuration is not readable in namespace %s: %s", e.Cluster, e.Namespace, e.Reason)
}

// ReadKueueFacts reads the Configuration of the Kueue that runs in namespace
// on c: the Deployment whose container has a --config argument leads to the
// ConfigMap and key mounted there (its --feature-gates argument adds gates);
// without such a Deployment, ConfigMap kueue-manager-config (key
// controller_manager_config.yaml) is read, which the local topology publishes
// for its in-process Kueue. Kueue's defaults fill what the file leaves out.
func ReadKueueFacts(ctx context.Context, c *Cluster, namespace string) (KueueFacts, error) {
	cmName, key, deployment, argGates, image, err := findKueueDeployment(ctx, c, namespace)
	if err != nil {
		return KueueFacts{}, err
	}
	cm := &corev1.ConfigMap{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cmName}, cm); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return KueueFacts{}, &NotReadable{Cluster: c.Name, Namespace: namespace, Reason: fmt.Sprintf("ConfigMap %s/%s: %v", namespace, cmName, err)}
		}
		return KueueFacts{}, fmt.Errorf("cluster %q: read ConfigMap %s/%s: %w", c.Name, namespace, cmName, err)
	}
	raw, ok := cm.Data[key]
	if !ok {
		return KueueFacts{}, fmt.Errorf("cluster %q: ConfigMap %s/%s has no key %q", c.Name, namespace, cmName, key)
	}
	source := fmt.Sprintf("ConfigMap %s/%s", namespace, cmName)
	if deployment != "" {
		source += fmt.Sprintf(" (Deployment %s/%s)", namespace, deployment)
	}
	f, err := FactsFromConfiguration([]byte(raw), source)
	if err != nil {
		return KueueFacts{}, fmt.Errorf("cluster %q: %w", c.Name, err)
	}
	for k, v := range argGates {
		f.FeatureGates[k] = v
	}
	f.Version = cm.Annotations[KueueVersionAnnotation]
	if f.Version == "" {
		f.Version = imageTag(image)
	}
	f.NominationPolicy, f.NominationPolicyRead, f.NominationPolicyNote = nominationPolicy(ctx, c)
	return f, nil
}

// nominationPolicySuffix ends the name Kueue's chart gives its
// MutatingAdmissionPolicy that clears status.nominatedClusterNames.
const nominationPolicySuffix = "-clear-nominated-cluster-names"

// nominationPolicy finds, on c, the MutatingAdmissionPolicy that clears
// nominations (NominationPolicy).
func nominationPolicy(ctx context.Context, c *Cluster) (name string, read bool, note string) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicyList"})
	err := c.Client.List(ctx, l)
	switch {
	case apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return "", true, "admissionregistration.k8s.io/v1 MutatingAdmissionPolicy not served"
	case err != nil:
		return "", false, fmt.Sprintf("MutatingAdmissionPolicies not listed: %v", err)
	}
	for _, p := range l.Items {
		if strings.HasSuffix(p.GetName(), nominationPolicySuffix) {
			return p.GetName(), true, "MutatingAdmissionPolicy " + p.GetName()
		}
	}
	return "", true, "no MutatingAdmissionPolicy *" + nominationPolicySuffix
}

// VersionAtLeast reports whether the Kueue the cluster runs is release v
// ("v0.19.0") or newer, by semantic version (a checkout's pre-release
// "v0.19.99-checkout" counts as older than v0.19.99); known is false when
// Version was not read (then atLeast is false too): a rule that depends on
// it must say which version it assumed.
func (f KueueFacts) VersionAtLeast(v string) (atLeast, known bool) {
	if !semver.IsValid(f.Version) {
		return false, false
	}
	return semver.Compare(f.Version, v) >= 0, true
}

// imageTag is the tag of an image reference ("" for none or a digest).
func imageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return ""
}

// FactsFromConfiguration parses a Kueue Configuration file and applies
// Kueue's defaults (configapi.SetDefaults_Configuration).
func FactsFromConfiguration(raw []byte, source string) (KueueFacts, error) {
	var cfg configapi.Configuration
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return KueueFacts{}, fmt.Errorf("%s: not a Kueue Configuration: %w", source, err)
	}
	configapi.SetDefaults_Configuration(&cfg)
	f := KueueFacts{
		Namespace:         ptr.Deref(cfg.Namespace, configapi.DefaultNamespace),
		Origin:            ptr.Deref(cfg.MultiKueue.Origin, configapi.DefaultMultiKueueOrigin),
		Dispatcher:        ptr.Deref(cfg.MultiKueue.DispatcherName, configapi.MultiKueueDispatcherModeAllAtOnce),
		GCInterval:        cfg.MultiKueue.GCInterval.Duration,
		WorkerLostTimeout: cfg.MultiKueue.WorkerLostTimeout.Duration,
		Integrations:      slices.Clone(cfg.Integrations.Frameworks),
		FeatureGates:      map[string]bool{},
		Source:            source,
	}
	for k, v := range cfg.FeatureGates {
		f.FeatureGates[k] = v
	}
	// Fields of newer releases than the API types this library compiles
	// against, read from the file itself.
	var newer struct {
		MultiKueue struct {
			IncrementalDispatcherConfig struct {
				StepSize int `json:"stepSize"`
			} `json:"incrementalDispatcherConfig"`
		} `json:"multiKueue"`
	}
	if err := yaml.Unmarshal(raw, &newer); err == nil {
		f.IncrementalStepSize = newer.MultiKueue.IncrementalDispatcherConfig.StepSize
	}
	if cfg.MultiKueue.ClusterProfile != nil {
		f.CredentialsProviders = slices.Clone(cfg.MultiKueue.ClusterProfile.CredentialsProviders)
	}
	return f, nil
}

// findKueueDeployment returns the ConfigMap and key a Kueue Deployment in
// namespace reads its --config from, the Deployment's name, the gates of
// its --feature-gates argument and its container's image. Without such a
// Deployment it returns the default ConfigMap name and key.
func findKueueDeployment(ctx context.Context, c *Cluster, namespace string) (cm, key, deployment string, gates map[string]bool, image string, err error) {
	var deps appsv1.DeploymentList
	if err := c.Client.List(ctx, &deps, client.InNamespace(namespace)); err != nil && !apierrors.IsForbidden(err) {
		return "", "", "", nil, "", fmt.Errorf("cluster %q: list Deployments in %s: %w", c.Name, namespace, err)
	}
	slices.SortFunc(deps.Items, func(a, b appsv1.Deployment) int { // the chart's name first
		return boolRank(a.Name != KueueDeploymentName) - boolRank(b.Name != KueueDeploymentName)
	})
	for _, d := range deps.Items {
		for _, ctr := range d.Spec.Template.Spec.Containers {
			cfgPath, gates, ok := kueueArgs(append(slices.Clone(ctr.Command), ctr.Args...))
			if !ok {
				continue
			}
			name, k, found := configMapAt(d.Spec.Template.Spec.Volumes, ctr.VolumeMounts, cfgPath)
			if !found {
				return "", "", "", nil, "", &NotReadable{Cluster: c.Name, Namespace: namespace,
					Reason: fmt.Sprintf("Deployment %s reads --config=%s, which no ConfigMap volume provides", d.Name, cfgPath)}
			}
			return name, k, d.Name, gates, ctr.Image, nil
		}
	}
	return KueueConfigMapName, KueueConfigKey, "", nil, "", nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// kueueArgs finds --config and --feature-gates in a Kueue container's
// command line.
func kueueArgs(args []string) (cfgPath string, gates map[string]bool, ok bool) {
	gates = map[string]bool{}
	for i, a := range args {
		val := func(flag string) (string, bool) {
			if v, found := strings.CutPrefix(a, flag+"="); found {
				return v, true
			}
			if a == flag && i+1 < len(args) {
				return args[i+1], true
			}
			return "", false
		}
		if v, found := val("--config"); found {
			cfgPath, ok = v, true
		}
		if v, found := val("--feature-gates"); found {
			for _, kv := range strings.Split(v, ",") {
				k, b, _ := strings.Cut(strings.TrimSpace(kv), "=")
				if on, err := strconv.ParseBool(b); err == nil && k != "" {
					gates[k] = on
				}
			}
		}
	}
	return cfgPath, gates, ok
}

// configMapAt returns the ConfigMap and key that provide the file at p in a
// container: a mount of a ConfigMap volume at p with subPath (the chart), or
// at p's directory with p's base name as the key (kustomize).
func configMapAt(vols []corev1.Volume, mounts []corev1.VolumeMount, p string) (name, key string, ok bool) {
	byName := map[string]*corev1.ConfigMapVolumeSource{}
	for _, v := range vols {
		if v.ConfigMap != nil {
			byName[v.Name] = v.ConfigMap
		}
	}
	for _, m := range mounts {
		cm := byName[m.Name]
		if cm == nil {
			continue
		}
		switch {
		case m.MountPath == p && m.SubPath != "":
			return cm.Name, itemKey(cm, m.SubPath), true
		case path.Clean(m.MountPath) == path.Dir(p):
			return cm.Name, itemKey(cm, path.Base(p)), true
		}
	}
	return "", "", false
}

// itemKey maps a file name in a ConfigMap volume back to its key.
func itemKey(cm *corev1.ConfigMapVolumeSource, file string) string {
	for _, it := range cm.Items {
		if it.Path == file {
			return it.Key
		}
	}
	return file
}
