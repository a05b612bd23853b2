package kind

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
)

// Defaults of Options.
const (
	DefaultNamePrefix   = "mktk-"
	DefaultParallel     = 3
	DefaultWaitForReady = 5 * time.Minute
)

// Runtime names accepted in Options.Runtime (kind's node providers).
const (
	RuntimeDocker  = "docker"
	RuntimePodman  = "podman"
	RuntimeNerdctl = "nerdctl"
)

// Options say how the kind clusters are made. The zero value works: one kind
// cluster per topology cluster, named DefaultNamePrefix + its name, on
// a node image built offline, created three at a time and deleted on Close.
type Options struct {
	// NamePrefix is prepended to each topology cluster name to make the kind
	// cluster name ("mktk-" + "worker-1"): kind cluster names are global to
	// the container runtime. Default DefaultNamePrefix. The control-plane
	// container, "<prefix><name>-control-plane", must be a valid host name:
	// the manager reaches workers by it.
	NamePrefix string
	// NodeImage is the kind node image. Empty (the default): one built
	// here, offline, for the local topology's Kubernetes version
	// (nodeimage.EnsureNode, cached; docker only). A kindest/node image
	// works too where it can be pulled or is present.
	NodeImage string
	// Runtime is the container runtime kind drives: RuntimeDocker,
	// RuntimePodman or RuntimeNerdctl. Default: $KIND_EXPERIMENTAL_PROVIDER
	// as the kind CLI reads it, else kind's own detection
	// (cluster.DetectNodeProvider: docker, nerdctl, podman, in that order).
	Runtime string
	// Parallel bounds how many clusters are created at once; default
	// DefaultParallel. (Kueue is installed on all of them at once: Helm
	// mostly waits.)
	Parallel int
	// WaitForReady bounds kind's wait for each control plane to be Ready;
	// default DefaultWaitForReady.
	WaitForReady time.Duration
	// Keep leaves the clusters this provider created running after Close
	// (with Kueue installed, the MultiKueue objects the topology created
	// removed), so that the next run reuses them; also after a failed
	// Provision, for inspection. Without Keep they are deleted in both
	// cases. Clusters that existed before are never deleted, Keep or not.
	Keep bool
	// KueueImage and JobSetImage override the controller images
	// (install.KueueOptions.Image, install.JobSetOptions.Image).
	KueueImage  install.Image
	JobSetImage install.Image
	// CredentialsPlugin puts the ClusterProfile connector's credentials
	// plugin into the manager's Kueue pod (install.KueueOptions). Default,
	// for the secretreader plugin (connect.ClusterProfile): an image built
	// here from the binary the local topology runs, with the plugin at the
	// connector's PluginCommand (PluginCommand when the provider's default
	// connector is used). Not used with the kubeconfig Secret connector.
	CredentialsPlugin *install.CredentialsPlugin
	// ExtraImages are loaded into the workers' nodes too (the images your
	// jobs run), when present locally.
	ExtraImages []string
	// SkipImageLoad loads no image into the nodes: they pull what they need.
	SkipImageLoad bool
	// InstallTimeout bounds each Helm install and readiness wait; default
	// install.DefaultTimeout.
	InstallTimeout time.Duration
	// Configure, when set, may change the kind configuration of each cluster
	// before it is created (add nodes, port mappings, feature gates). name is
	// the topology cluster name. It is not called for reused clusters.
	Configure func(name string, role topology.Role, cfg *v1alpha4.Cluster)
}

// runtimes are the names Options.Runtime accepts.
func runtimes() []string { return []string{RuntimeDocker, RuntimePodman, RuntimeNerdctl} }

// withDefaults validates o and applies the defaults. The error names the
// first field that is wrong.
func (o Options) withDefaults() (Options, error) {
	if o.NamePrefix == "" {
		o.NamePrefix = DefaultNamePrefix
	}
	if strings.TrimSpace(o.NodeImage) != o.NodeImage || strings.ContainsAny(o.NodeImage, " \t\n") {
		return o, fmt.Errorf("kind: Options.NodeImage: %q contains white space", o.NodeImage)
	}
	if o.Runtime != "" && !slices.Contains(runtimes(), o.Runtime) {
		return o, fmt.Errorf("kind: Options.Runtime: %q; use %q, %q or %q (or leave it empty to detect)", o.Runtime, RuntimeDocker, RuntimePodman, RuntimeNerdctl)
	}
	if o.Parallel < 0 {
		return o, fmt.Errorf("kind: Options.Parallel: %d is negative", o.Parallel)
	}
	if o.Parallel == 0 {
		o.Parallel = DefaultParallel
	}
	if o.WaitForReady < 0 {
		return o, fmt.Errorf("kind: Options.WaitForReady: %s is negative", o.WaitForReady)
	}
	if o.WaitForReady == 0 {
		o.WaitForReady = DefaultWaitForReady
	}
	if o.InstallTimeout < 0 {
		return o, fmt.Errorf("kind: Options.InstallTimeout: %s is negative", o.InstallTimeout)
	}
	if o.InstallTimeout == 0 {
		o.InstallTimeout = install.DefaultTimeout
	}
	for i, img := range o.ExtraImages {
		if strings.TrimSpace(img) == "" || strings.ContainsAny(img, " \t\n") {
			return o, fmt.Errorf("kind: Options.ExtraImages[%d]: %q is not an image reference", i, img)
		}
	}
	return o, nil
}

// controlPlaneSuffix is what kind appends to a cluster name to name its
// control-plane container, the host name workers are reached by.
const controlPlaneSuffix = "-control-plane"

// kindName is the kind cluster name of a topology cluster. The error names
// the field at fault.
func (o Options) kindName(field, name string) (string, error) {
	kn := o.NamePrefix + name
	host := kn + controlPlaneSuffix
	if errs := validation.IsDNS1123Label(host); len(errs) > 0 {
		return "", fmt.Errorf("kind: Options.NamePrefix %q with %s %q: the control-plane host name %q is not valid: %s", o.NamePrefix, field, name, host, errs[0])
	}
	return kn, nil
}

// ErrNoKubeRayImage is why this provider refuses the Ray integrations:
// install.KubeRay installs the operator from its module's kustomization, but
// its image would have to be built here (no registry is reached) and loaded
// into the nodes, which this provider does for Kueue and JobSet only.
var ErrNoKubeRayImage = errors.New("kind: the KubeRay operator's image is not built by this provider (it builds the Kueue and JobSet images only); install KubeRay yourself with install.KubeRay and an image your nodes can pull, on clusters attached with topology/existing")

// unsupportedIntegrations are Kueue integrations whose controller this
// provider cannot run (ErrNoKubeRayImage).
func unsupportedIntegrations(spec topology.Spec) error {
	for i, in := range spec.Kueue.Integrations {
		switch in {
		case topology.IntegrationRayJob, topology.IntegrationRayCluster, topology.IntegrationRayService:
			return fmt.Errorf("kind: topology.Options.Kueue.Integrations[%d]: %s needs the KubeRay operator on every cluster: %w", i, in, ErrNoKubeRayImage)
		}
	}
	return nil
}
