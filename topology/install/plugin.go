package install

import (
	"bytes"
	"cmp"
	"fmt"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/topology"
)

// CredentialsPlugin puts a ClusterProfile credentials exec plugin (the
// cluster-inventory-api secretreader, or yours) into Kueue's pod, where
// Kueue runs it: the released Kueue image has none, and Kueue's chart has no
// values for extra volumes or init containers. Kueue()'s Helm release is
// post-rendered: an emptyDir volume, an init container from Image that
// copies the plugin into it, and the manager container mounting it
// read-only at the directory of the credentials provider's command
// (KueueOptions.Needs, from the connector: connect.ClusterProfile's
// PluginCommand, for example /plugins/secretreader-plugin). The plugin runs
// with the pod's ServiceAccount, which Kueue's chart already lets read the
// Secrets in Kueue's namespace.
type CredentialsPlugin struct {
	// Image holds the plugin binary and, unless Command says otherwise, a
	// cp (a busybox- or Debian-based image). Repository is required; the
	// pull policy defaults to IfNotPresent.
	Image Image
	// Source is the plugin binary's absolute path in Image. Required unless
	// Command is set.
	Source string
	// Command replaces the init container's command, which by default is
	// ["cp", Source, <the provider's command path>]: for an image without
	// cp, a command of its own that writes the plugin to that path. The
	// shared directory is mounted at the path's directory.
	Command []string
}

// pluginVolume is the emptyDir shared by the init container and Kueue.
const pluginVolume = "mktk-credentials-plugin"

// pluginInjection is a validated CredentialsPlugin for one release.
type pluginInjection struct {
	deployment string // the controller Deployment's name
	target     string // the plugin's path in Kueue's container
	init       corev1.Container
}

// planPlugin validates p against the needs and returns what to inject; nil
// when p is nil.
func planPlugin(p *CredentialsPlugin, needs topology.KueueNeeds, release string) (*pluginInjection, error) {
	if p == nil {
		return nil, nil
	}
	const field = "install: KueueOptions.CredentialsPlugin"
	var cmds []string
	for _, cp := range needs.CredentialsProviders {
		cmds = append(cmds, cp.ExecConfig.Command)
	}
	switch {
	case p.Image.Repository == "":
		return nil, fmt.Errorf("%s.Image.Repository: empty; name the image that holds the plugin", field)
	case len(cmds) == 0:
		return nil, fmt.Errorf("%s: KueueOptions.Needs name no credentials provider to put it in (use the ClusterProfile connector's needs, with its PluginCommand set to the path in the pod)", field)
	case len(cmds) > 1:
		return nil, fmt.Errorf("%s: KueueOptions.Needs name %d credentials providers (%s); one plugin goes into one", field, len(cmds), strings.Join(cmds, ", "))
	case len(p.Command) == 0 && !path.IsAbs(p.Source):
		return nil, fmt.Errorf("%s.Source: %q is not an absolute path in the image", field, p.Source)
	}
	target := cmds[0]
	dir := path.Dir(target)
	if !path.IsAbs(target) || dir == "/" || target != path.Clean(target) {
		return nil, fmt.Errorf("%s: the credentials provider's command %q (connect.ClusterProfile.PluginCommand) must be a clean absolute path below a directory of its own, such as /plugins/secretreader-plugin, for the plugin's volume to be mounted there", field, target)
	}
	for _, taken := range []string{"/tmp/k8s-webhook-server/serving-certs", "/visibility", "/controller_manager_config.yaml", "/etc/kueue/metrics/certs"} {
		if dir == taken || strings.HasPrefix(taken, dir+"/") || strings.HasPrefix(dir, taken+"/") {
			return nil, fmt.Errorf("%s: the plugin's directory %q (from the command %q) overlaps the chart's mount %s", field, dir, target, taken)
		}
	}
	image := p.Image.Repository
	if p.Image.Tag != "" {
		image += ":" + p.Image.Tag
	}
	command := p.Command
	if len(command) == 0 {
		command = []string{"cp", p.Source, target}
	}
	return &pluginInjection{
		deployment: release + "-controller-manager",
		target:     target,
		init: corev1.Container{
			Name:            "credentials-plugin",
			Image:           image,
			ImagePullPolicy: corev1.PullPolicy(cmp.Or(p.Image.PullPolicy, string(corev1.PullIfNotPresent))),
			Command:         command,
			VolumeMounts:    []corev1.VolumeMount{{Name: pluginVolume, MountPath: dir}},
		},
	}, nil
}

// Run is Helm's post-renderer (postrender.PostRenderer): the manifest with
// the controller Deployment patched, every other document as rendered.
func (p *pluginInjection) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	docs := strings.Split(rendered.String(), "\n---")
	found := false
	for i, doc := range docs {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind != "Deployment" || meta.Metadata.Name != p.deployment {
			continue
		}
		out, err := p.patch([]byte(doc))
		if err != nil {
			return nil, err
		}
		docs[i] = "\n" + string(out)
		found = true
	}
	if !found {
		return nil, fmt.Errorf("install: KueueOptions.CredentialsPlugin: the chart rendered no Deployment %q to put the plugin into", p.deployment)
	}
	return bytes.NewBufferString(strings.Join(docs, "\n---")), nil
}

// patch adds the volume, the init container and the manager's mount to one
// Deployment document.
func (p *pluginInjection) patch(doc []byte) ([]byte, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("install: KueueOptions.CredentialsPlugin: decoding Deployment %s: %w", p.deployment, err)
	}
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, d); err != nil {
		return nil, fmt.Errorf("install: KueueOptions.CredentialsPlugin: decoding Deployment %s: %w", p.deployment, err)
	}
	spec := &d.Spec.Template.Spec
	mounted := false
	for i := range spec.Containers {
		if spec.Containers[i].Name == "manager" {
			spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, corev1.VolumeMount{Name: pluginVolume, MountPath: path.Dir(p.target), ReadOnly: true})
			mounted = true
		}
	}
	if !mounted {
		return nil, fmt.Errorf("install: KueueOptions.CredentialsPlugin: Deployment %s has no container \"manager\" to mount the plugin in", p.deployment)
	}
	spec.InitContainers = append(spec.InitContainers, p.init)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: pluginVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return nil, err
	}
	delete(obj, "status")
	return yaml.Marshal(obj)
}
