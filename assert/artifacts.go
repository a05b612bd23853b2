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

	"github.com/multikueue-testkit/testkit/internal/clusterlogs"
	"github.com/multikueue-testkit/testkit/internal/redact"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// EnvArtifacts names the directory where failed assertions write their
// report and a dump of the objects involved, one file per cluster, when
// Checker.Artifacts is not set (ArtifactsFromEnv).
const EnvArtifacts = "ARTIFACTS"

// ArtifactsFromEnv reads EnvArtifacts with getenv; New sets
// Checker.Artifacts to it.
func ArtifactsFromEnv(getenv func(string) string) string { return getenv(EnvArtifacts) }

// LogLines is how many last lines of each controller log a failure keeps.
const LogLines = 300

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

// fail returns f, after writing it, a dump of refs, the Events of the
// objects among them and every cluster's controller logs under
// c.Artifacts when that is set. Everything written is redacted.
func (c *Checker) fail(ctx context.Context, f *Failure, refs ...objRef) error {
	dir := c.Artifacts
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
	for _, cl := range c.Topo.Clusters() {
		if err := c.writeClusterLogs(ctx, dir, cl, refs); err != nil {
			return "", err
		}
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

// writeClusterLogs writes, under dir/<cluster>/, the last LogLines lines of
// each controller log of cl (clusterlogs: the provider's files, else pods/log
// in Kueue's namespace) and events.txt, the Events of the objects of refs on
// cl. What could not be read is said in a file, not dropped.
func (c *Checker) writeClusterLogs(ctx context.Context, dir string, cl *topology.Cluster, refs []objRef) error {
	out := filepath.Join(dir, cl.Name)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	logs, err := clusterlogs.Collect(ctx, c.Topo, cl, c.Topo.Spec.Kueue.Namespace, LogLines)
	for _, l := range logs {
		if werr := os.WriteFile(filepath.Join(out, l.Name), []byte(redact.String(l.Text)), 0o644); werr != nil {
			return werr
		}
	}
	if err != nil {
		if werr := os.WriteFile(filepath.Join(out, "logs-unread.txt"), []byte(redact.String(err.Error()+"\n")), 0o644); werr != nil {
			return werr
		}
	}
	var sb strings.Builder
	for _, r := range refs {
		if r.cluster != cl.Name || r.obj.GetName() == "" {
			continue
		}
		var evs corev1.EventList
		if err := cl.Client.List(ctx, &evs, client.InNamespace(r.obj.GetNamespace()), client.MatchingFields{"involvedObject.name": r.obj.GetName()}); err != nil {
			fmt.Fprintf(&sb, "# Events of %s/%s: %v\n", r.obj.GetNamespace(), r.obj.GetName(), err)
			continue
		}
		for _, e := range evs.Items {
			at := e.LastTimestamp.Time
			if at.IsZero() {
				at = e.EventTime.Time
			}
			fmt.Fprintf(&sb, "%s %s %s %s/%s: %s (x%d)\n", at.Format(time.RFC3339), e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message, max(e.Count, 1))
		}
	}
	if sb.Len() == 0 {
		sb.WriteString("# no Events for the objects involved\n")
	}
	return os.WriteFile(filepath.Join(out, "events.txt"), []byte(redact.String(sb.String())), 0o644)
}
