package apiservertest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// dryRunOnly are the kinds applied with a server-side dry run: persisted, they
// would make this API server call the chart's Services, which have no pods
// here (admission and conversion webhooks, aggregated APIs), for the
// topology's own Kueue objects. A dry run is validated and admitted like a
// real write, then discarded.
func dryRunOnly(kind string) bool {
	switch kind {
	case "CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService":
		return true
	}
	return false
}

// TestChartsOnAPIServer starts a local topology (1 worker) and, on the
// worker, (1) applies every object of the rendered Kueue chart with
// server-side apply and (2) installs, upgrades and uninstalls the JobSet
// chart through Helm, which exercises the in-memory REST client getter, the
// release storage and install-or-upgrade on a real API server. There is no
// kubelet: Deployments never become Available, which is expected and checked
// to be reported with the cluster and object named.
func TestChartsOnAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	topo, err := local.New(ctx, topology.Options{Workers: 1}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	worker := topo.Workers[0]

	t.Run("kueue chart objects accepted", func(t *testing.T) {
		spec := topo.Spec
		spec.Kueue.Namespace = "kueue-chart"
		start := time.Now()
		// With the ClusterProfile credentials plugin put into the pod: the
		// post-rendered Deployment must be one the API server accepts.
		needs := topology.KueueNeeds{CredentialsProviders: []configapi.ClusterProfileCredentialsProvider{{
			Name: "secretreader", ExecConfig: clientcmdapi.ExecConfig{Command: "/plugins/secretreader-plugin", APIVersion: "client.authentication.k8s.io/v1"},
		}}}
		plugin := &install.CredentialsPlugin{Image: install.Image{Repository: "example.test/secretreader", Tag: "v0.1.3"}, Source: "/secretreader-plugin"}
		r, err := install.RenderKueue(ctx, install.KueueOptions{Spec: spec, ReleaseName: "chart-kueue", Needs: needs, CredentialsPlugin: plugin})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rendered %s: %d objects in %s", r.Chart, len(r.Objects), time.Since(start).Round(time.Millisecond))
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: spec.Kueue.Namespace}}
		if err := worker.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		persisted, dry := map[string]int{}, map[string]int{}
		start = time.Now()
		for _, o := range r.Objects {
			o := o.DeepCopy()
			opts := []client.PatchOption{client.FieldOwner("install-test"), client.ForceOwnership}
			if dryRunOnly(o.GetKind()) {
				opts = append(opts, client.DryRunAll)
			}
			if err := worker.Client.Patch(ctx, o, client.Apply, opts...); err != nil {
				t.Errorf("cluster %q refuses %s %s: %v", worker.Name, o.GetKind(), key(o), err)
				continue
			}
			if dryRunOnly(o.GetKind()) {
				dry[o.GetKind()]++
				continue
			}
			persisted[o.GetKind()]++
			back := &unstructured.Unstructured{}
			back.SetGroupVersionKind(o.GroupVersionKind())
			if err := worker.Client.Get(ctx, client.ObjectKeyFromObject(o), back); err != nil {
				t.Errorf("cluster %q: %s %s not readable after apply: %v", worker.Name, o.GetKind(), key(o), err)
			}
		}
		t.Logf("applied in %s; persisted: %s; server-side dry run: %s", time.Since(start).Round(time.Millisecond), kinds(persisted), kinds(dry))
		if n := sum(persisted) + sum(dry); n != len(r.Objects) {
			t.Errorf("%d of %d objects accepted", n, len(r.Objects))
		}
		if persisted["Deployment"] != 1 || dry["CustomResourceDefinition"] != 11 {
			t.Errorf("persisted %v, dry run %v: want the Deployment and 11 CRDs among them", persisted, dry)
		}
		var d appsv1.Deployment
		if err := worker.Client.Get(ctx, client.ObjectKey{Namespace: spec.Kueue.Namespace, Name: "chart-kueue-controller-manager"}, &d); err != nil {
			t.Fatalf("cluster %q: %v", worker.Name, err)
		}
		if ics := d.Spec.Template.Spec.InitContainers; len(ics) != 1 || ics[0].Image != "example.test/secretreader:v0.1.3" {
			t.Errorf("cluster %q: Deployment %s/%s init containers %+v, want the credentials plugin's", worker.Name, d.Namespace, d.Name, ics)
		}
	})

	t.Run("jobset helm install, upgrade, uninstall", func(t *testing.T) {
		opts := install.JobSetOptions{Timeout: 5 * time.Second, Progress: testlog.Writer(t)}
		wantErr := fmt.Sprintf(`Deployment jobset-system/jobset-controller Available on cluster %q`, worker.Name)

		// An object of the chart made by someone else: Helm refuses it
		// unless told to take ownership.
		r, err := install.RenderJobSet(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		var sa *unstructured.Unstructured
		for _, o := range r.Objects {
			if o.GetKind() == "ServiceAccount" {
				sa = o.DeepCopy()
			}
		}
		if err := worker.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "jobset-system"}}); err != nil {
			t.Fatal(err)
		}
		if err := worker.Client.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		_, err = install.JobSet(ctx, worker, opts)
		if err == nil || !strings.Contains(err.Error(), "set TakeOwnership") || !strings.Contains(err.Error(), fmt.Sprintf("cluster %q", worker.Name)) {
			t.Fatalf("JobSet over a foreign ServiceAccount: %v; want a refusal naming the cluster and suggesting TakeOwnership", err)
		}
		t.Logf("refused as expected: %v", err)
		opts.TakeOwnership = true

		start := time.Now()
		rel, err := install.JobSet(ctx, worker, opts)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("JobSet without a kubelet: %v; want an error naming %s", err, wantErr)
		}
		t.Logf("install took %s (of which 5s waiting for the Deployment); error as expected: %v", time.Since(start).Round(time.Millisecond), err)
		if rel == nil || rel.Revision != 1 || rel.Upgraded || rel.Cluster != worker.Name {
			t.Fatalf("first install: %v, want revision 1, not upgraded, on %q", rel, worker.Name)
		}
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := worker.Client.Get(ctx, client.ObjectKey{Name: "jobsets.jobset.x-k8s.io"}, crd); err != nil {
			t.Errorf("the chart's crds/ CRD is not installed: %v", err)
		}

		rel2, err := install.JobSet(ctx, worker, opts)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("second JobSet: %v; want an error naming %s", err, wantErr)
		}
		if rel2 == nil || rel2.Revision != 2 || !rel2.Upgraded {
			t.Fatalf("second install: %v, want an upgrade to revision 2", rel2)
		}

		if err := rel2.Uninstall(ctx); err != nil {
			t.Fatal(err)
		}
		for _, o := range rel2.Objects {
			back := &unstructured.Unstructured{}
			back.SetGroupVersionKind(o.GroupVersionKind())
			if err := worker.Client.Get(ctx, client.ObjectKeyFromObject(o), back); !apierrors.IsNotFound(err) {
				t.Errorf("after uninstall, %s %s: %v, want NotFound", o.GetKind(), key(o), err)
			}
		}
		var secrets corev1.SecretList
		if err := worker.Client.List(ctx, &secrets, client.InNamespace("jobset-system"), client.MatchingLabels{"owner": "helm", "name": "jobset"}); err != nil {
			t.Fatal(err)
		}
		if len(secrets.Items) != 0 {
			t.Errorf("after uninstall, %d Helm release Secrets remain", len(secrets.Items))
		}
		if err := install.Uninstall(ctx, worker, "jobset", "jobset-system", install.UninstallOptions{}); err != nil {
			t.Errorf("second uninstall: %v, want nil (idempotent)", err)
		}
	})

	t.Run("operators helm install, uninstall", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			install func(context.Context, *topology.Cluster, install.OperatorOptions) (*install.Release, error)
			ns, crd string
		}{
			{"LWS", install.LWS, "lws-system", "leaderworkersets.leaderworkerset.x-k8s.io"},
			{"Trainer", install.Trainer, "kubeflow-system", "trainjobs.trainer.kubeflow.org"},
			{"MPI operator", install.MPIOperator, "mpi-operator", "mpijobs.kubeflow.org"},
			{"training-operator", install.TrainingOperator, "kubeflow", "pytorchjobs.kubeflow.org"},
			{"AppWrapper", install.AppWrapper, "appwrapper-system", "appwrappers.workload.codeflare.dev"},
			{"KubeRay", install.KubeRay, "ray-system", "rayservices.ray.io"},
		} {
			opts := install.OperatorOptions{Timeout: 5 * time.Second, Progress: testlog.Writer(t)}
			start := time.Now()
			rel, err := tc.install(ctx, worker, opts)
			wantErr := fmt.Sprintf("Available on cluster %q", worker.Name)
			if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "Deployment "+tc.ns+"/") {
				t.Fatalf("%s without a kubelet: %v; want an error naming its Deployment in %s and %s", tc.name, err, tc.ns, wantErr)
			}
			t.Logf("%s: install took %s (of which 5s waiting for the Deployment); error as expected: %v", tc.name, time.Since(start).Round(time.Millisecond), err)
			if rel == nil || rel.Revision != 1 || rel.Cluster != worker.Name {
				t.Fatalf("%s: %v, want revision 1 on %q", tc.name, rel, worker.Name)
			}
			crd := &unstructured.Unstructured{}
			crd.SetAPIVersion("apiextensions.k8s.io/v1")
			crd.SetKind("CustomResourceDefinition")
			if err := worker.Client.Get(ctx, client.ObjectKey{Name: tc.crd}, crd); err != nil {
				t.Errorf("%s: the chart's crds/ CRD %s is not installed: %v", tc.name, tc.crd, err)
			}
			if err := rel.Uninstall(ctx); err != nil {
				t.Fatal(err)
			}
			for _, o := range rel.Objects {
				back := &unstructured.Unstructured{}
				back.SetGroupVersionKind(o.GroupVersionKind())
				k := client.ObjectKeyFromObject(o)
				// A chart may leave a namespaced object's namespace to
				// Helm (the release's).
				if namespaced, err := worker.Client.IsObjectNamespaced(back); err == nil && namespaced && k.Namespace == "" {
					k.Namespace = tc.ns
				}
				if err := worker.Client.Get(ctx, k, back); !apierrors.IsNotFound(err) {
					t.Errorf("%s: after uninstall, %s %s: %v, want NotFound", tc.name, o.GetKind(), k, err)
				}
			}
		}
	})

	t.Run("kueue applies the ClusterProfile CRD, then refuses foreign objects", func(t *testing.T) {
		// The worker's Kueue objects (CRDs...) were made by the local
		// provider, not by Helm: without TakeOwnership, Helm refuses them
		// before creating anything. The ClusterProfile CRD the needs ask for
		// comes first.
		needs := topology.KueueNeeds{ClusterProfileCRD: true, FeatureGates: map[string]bool{"MultiKueueClusterProfile": true}}
		rel, err := install.Kueue(ctx, worker, install.KueueOptions{Spec: topo.Spec, Needs: needs, Timeout: 30 * time.Second, Progress: testlog.Writer(t)})
		if err == nil || rel != nil || !strings.Contains(err.Error(), "set TakeOwnership") || !strings.Contains(err.Error(), "exists and cannot be imported") || !strings.Contains(err.Error(), fmt.Sprintf("cluster %q", worker.Name)) {
			t.Fatalf("Kueue over the local provider's CRDs: %v, %v; want a refusal naming the cluster, the foreign object and TakeOwnership", rel, err)
		}
		t.Logf("refused as expected: %.300s...", err)
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := worker.Client.Get(ctx, client.ObjectKey{Name: "clusterprofiles.multicluster.x-k8s.io"}, crd); err != nil {
			t.Errorf("ClusterProfile CRD not applied: %v", err)
		}
		var secrets corev1.SecretList
		if err := worker.Client.List(ctx, &secrets, client.InNamespace(topo.Spec.Kueue.Namespace), client.MatchingLabels{"owner": "helm"}); err != nil {
			t.Fatal(err)
		}
		if len(secrets.Items) != 0 {
			t.Errorf("a refused install left %d Helm release Secrets", len(secrets.Items))
		}
	})

	t.Run("errors name the cluster", func(t *testing.T) {
		_, err := install.Kueue(ctx, nil, install.KueueOptions{Spec: topo.Spec})
		if err == nil || !strings.Contains(err.Error(), "cluster is nil") {
			t.Errorf("nil cluster: %v", err)
		}
		bad := *worker
		bad.Config = nil
		_, err = install.JobSet(ctx, &bad, install.JobSetOptions{})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("cluster %q: Config is nil", worker.Name)) {
			t.Errorf("nil Config: %v", err)
		}
	})
}

func key(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

func kinds(n map[string]int) string {
	ks := make([]string, 0, len(n))
	for k := range n {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var sb strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&sb, "%s=%d ", k, n[k])
	}
	return fmt.Sprintf("%d objects: %s", sum(n), strings.TrimSpace(sb.String()))
}

func sum(n map[string]int) int {
	s := 0
	for _, v := range n {
		s += v
	}
	return s
}
