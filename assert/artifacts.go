package assert

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/internal/redact"
	"github.com/multikueue-testkit/testkit/observe"
)

// EnvArtifacts names the directory where failed assertions write their
// report and a dump of the objects involved, one file per cluster.
const EnvArtifacts = "ARTIFACTS"

// objRef is an object on a cluster whose current state a failure dumps.
type objRef struct {
	cluster string
	obj     client.Object // typed, with namespace and name set
}

// refs returns the Workload and the job object of t on every cluster.
func (t target) refs(c *Checker) []objRef {
	var out []objRef
	for _, cl := range c.Topo.Clusters() {
		out = append(out, objRef{cl.Name, &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: t.namespace, Name: t.workload}}})
		if job, err := observe.NewJobObject(t.jobKind); err == nil && t.job != "" {
			job.SetNamespace(t.namespace)
			job.SetName(t.job)
			out = append(out, objRef{cl.Name, job})
		}
	}
	return out
}

// setupRefs returns the MultiKueue objects and connection Secrets on the
// manager and the ClusterQueue on every cluster.
func (c *Checker) setupRefs() []objRef {
	mgr := c.Topo.Manager.Name
	out := []objRef{{mgr, &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: c.Topo.Spec.Queues.AdmissionCheck}}}}
	ns := c.Topo.Spec.Kueue.Namespace
	for _, w := range c.Topo.Workers {
		out = append(out, objRef{mgr, &kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: w.Name}}})
		// The credentials the MultiKueueCluster names (from the Observer's
		// cache: no request).
		mkc := &kueue.MultiKueueCluster{}
		if err := c.reader(mgr).Get(context.Background(), client.ObjectKey{Name: w.Name}, mkc); err != nil {
			continue
		}
		switch src := mkc.Spec.ClusterSource; {
		case src.KubeConfig != nil && src.KubeConfig.LocationType == kueue.SecretLocationType:
			out = append(out, objRef{mgr, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: src.KubeConfig.Location}}})
		case src.ClusterProfileRef != nil:
			out = append(out, objRef{mgr, &inventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: src.ClusterProfileRef.Name}}})
		}
	}
	for _, cl := range c.Topo.Clusters() {
		out = append(out, objRef{cl.Name, &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: c.Topo.Spec.Queues.ClusterQueue}}})
	}
	return out
}

// fail returns f, after writing it and a dump of refs under $ARTIFACTS when
// that is set. Everything written is redacted.
func (c *Checker) fail(ctx context.Context, f *Failure, refs ...objRef) error {
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		return f
	}
	out, err := c.writeArtifacts(ctx, dir, f, refs)
	if err != nil {
		f.Problems = append(f.Problems, fmt.Sprintf("(could not write artifacts to %s: %v)", dir, err))
		return f
	}
	f.Artifacts = out
	return f
}

func (c *Checker) writeArtifacts(ctx context.Context, root string, f *Failure, refs []objRef) (string, error) {
	name := regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(f.Assertion+"-"+f.Object, "_")
	dir := filepath.Join(root, "multikueue-testkit", fmt.Sprintf("%s-%s", time.Now().Format("150405.000"), name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(f.Error()), 0o644); err != nil {
		return "", err
	}
	perCluster := map[string]*strings.Builder{}
	for _, cl := range c.Topo.Clusters() {
		perCluster[cl.Name] = &strings.Builder{}
	}
	for _, r := range refs {
		cl := c.Topo.Cluster(r.cluster)
		sb := perCluster[r.cluster]
		if cl == nil || sb == nil {
			continue
		}
		gvk, _ := cl.Client.GroupVersionKindFor(r.obj)
		key := client.ObjectKeyFromObject(r.obj)
		if err := cl.Client.Get(ctx, key, r.obj); err != nil {
			fmt.Fprintf(sb, "---\n# %s %s: %v\n", gvk.Kind, key, err)
			continue
		}
		if sec, ok := r.obj.(*corev1.Secret); ok {
			for k := range sec.Data {
				sec.Data[k] = []byte(redact.Placeholder)
			}
			sec.StringData = nil
		}
		r.obj.GetObjectKind().SetGroupVersionKind(gvk)
		r.obj.SetManagedFields(nil)
		raw, err := yaml.Marshal(r.obj)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(sb, "---\n%s", raw)
	}
	for cluster, sb := range perCluster {
		body := redact.String(sb.String())
		if body == "" {
			body = "# nothing relevant on this cluster\n"
		}
		if err := os.WriteFile(filepath.Join(dir, cluster+".yaml"), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}
