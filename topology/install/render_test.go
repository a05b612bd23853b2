package install_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	componentconfig "k8s.io/component-base/config/v1alpha1"
	"k8s.io/utils/ptr"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueueconfig "sigs.k8s.io/kueue/pkg/config"
	// Registers Kueue's integrations, which config.Load validates against,
	// as cmd/kueue does.
	_ "sigs.k8s.io/kueue/pkg/controller/jobs"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
)

// renderCase is a Kueue installation with every in-process setting away from
// its default, so that a value lost between Spec.KueueConfiguration and the
// chart shows.
func renderCase(t *testing.T) (install.KueueOptions, configapi.Configuration) {
	t.Helper()
	spec, err := topology.Options{
		Workers: 2,
		Kueue: topology.KueueOptions{
			Namespace:         "kueue-mk",
			Integrations:      []string{topology.IntegrationBatchJob, topology.IntegrationJobSet},
			Dispatcher:        topology.DispatcherIncremental,
			GCInterval:        ptr.To(37 * time.Second),
			WorkerLostTimeout: ptr.To(4 * time.Minute),
			Origin:            "testkit-origin",
			FeatureGates:      map[string]bool{"MultiKueueOrchestratedPreemption": true, "VisibilityOnDemand": false},
		},
	}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	needs := topology.KueueNeeds{
		ClusterProfileCRD: true,
		FeatureGates:      map[string]bool{"MultiKueueClusterProfile": true},
		CredentialsProviders: []configapi.ClusterProfileCredentialsProvider{{
			Name: "secretreader",
			ExecConfig: clientcmdapi.ExecConfig{
				Command:            "/plugins/secretreader-plugin",
				Args:               []string{"--verbose"},
				APIVersion:         "client.authentication.k8s.io/v1",
				ProvideClusterInfo: true,
				InteractiveMode:    clientcmdapi.NeverExecInteractiveMode,
			},
		}},
	}
	return install.KueueOptions{Spec: spec, Needs: needs}, spec.KueueConfiguration(needs)
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("rendered chart has no %s %q", kind, name)
	return nil
}

func countKinds(objs []*unstructured.Unstructured) string {
	n := map[string]int{}
	for _, o := range objs {
		n[o.GetKind()]++
	}
	kinds := make([]string, 0, len(n))
	for k := range n {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var sb strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&sb, "%s=%d ", k, n[k])
	}
	return strings.TrimSpace(sb.String())
}

// TestRenderKueue renders the chart of the pinned Kueue module offline and
// checks that the Deployment runs the released image and that Kueue's own
// config loader, reading the manager ConfigMap as cmd/kueue does, gets the
// configuration the local topology runs in-process.
func TestRenderKueue(t *testing.T) {
	ctx := context.Background()
	opts, want := renderCase(t)
	start := time.Now()
	r, err := install.RenderKueue(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rendered %s in %s: %d objects: %s", r.Chart, time.Since(start).Round(time.Millisecond), len(r.Objects), countKinds(r.Objects))

	// The Deployment: released image, IfNotPresent, gates on the command line.
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, r.Objects, "Deployment", "kueue-controller-manager").Object, d); err != nil {
		t.Fatal(err)
	}
	if d.Namespace != "kueue-mk" {
		t.Errorf("Deployment namespace %q, want kueue-mk", d.Namespace)
	}
	if got := *d.Spec.Replicas; got != 1 {
		t.Errorf("replicas %d, want 1", got)
	}
	mgr := d.Spec.Template.Spec.Containers[0]
	if mgr.Image != "registry.k8s.io/kueue/kueue:v0.19.2" || mgr.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("manager image %s pull %s, want registry.k8s.io/kueue/kueue:v0.19.2 IfNotPresent", mgr.Image, mgr.ImagePullPolicy)
	}
	var gateFlag string
	for _, a := range mgr.Args {
		if v, ok := strings.CutPrefix(a, "--feature-gates="); ok {
			gateFlag = v
		}
	}
	if wantFlag := "MultiKueueClusterProfile=true,MultiKueueOrchestratedPreemption=true,VisibilityOnDemand=false"; gateFlag != wantFlag {
		t.Errorf("--feature-gates=%q, want %q (args %q)", gateFlag, wantFlag, mgr.Args)
	}
	gates := map[string]bool{}
	for _, kv := range strings.Split(gateFlag, ",") {
		k, v, _ := strings.Cut(kv, "=")
		gates[k] = v == "true"
	}
	if !reflect.DeepEqual(gates, want.FeatureGates) || !reflect.DeepEqual(r.FeatureGates, want.FeatureGates) {
		t.Errorf("feature gates: flag %v, render %v; want %v", gates, r.FeatureGates, want.FeatureGates)
	}

	// The manager ConfigMap, loaded with Kueue's own loader (defaults and
	// validation included), as /manager --config does.
	cm := find(t, r.Objects, "ConfigMap", "kueue-manager-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "controller_manager_config.yaml")
	path := filepath.Join(t.TempDir(), "controller_manager_config.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := configapi.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	_, got, err := kueueconfig.Load(scheme, path)
	if err != nil {
		t.Fatalf("Kueue's config.Load refuses the rendered configuration: %v\n%s", err, data)
	}
	if errs := kueueconfig.LoadAndValidateFeatureGates(gateFlag, got.FeatureGates); len(errs) > 0 {
		t.Errorf("Kueue refuses the rendered feature gates: %v", errs.ToAggregate())
	}
	if got.FeatureGates != nil {
		t.Errorf("configuration has featureGates %v; Kueue refuses them together with --feature-gates", got.FeatureGates)
	}
	for _, f := range []struct {
		field     string
		got, want any
	}{
		{"namespace", got.Namespace, want.Namespace},
		{"integrations.frameworks", got.Integrations.Frameworks, want.Integrations.Frameworks},
		{"multiKueue.gcInterval", got.MultiKueue.GCInterval, want.MultiKueue.GCInterval},
		{"multiKueue.origin", got.MultiKueue.Origin, want.MultiKueue.Origin},
		{"multiKueue.workerLostTimeout", got.MultiKueue.WorkerLostTimeout, want.MultiKueue.WorkerLostTimeout},
		{"multiKueue.dispatcherName", got.MultiKueue.DispatcherName, want.MultiKueue.DispatcherName},
		{"multiKueue.clusterProfile", got.MultiKueue.ClusterProfile, want.MultiKueue.ClusterProfile},
		{"manageJobsWithoutQueueName", got.ManageJobsWithoutQueueName, want.ManageJobsWithoutQueueName},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("%s: rendered %s, in-process %s", f.field, show(f.got), show(f.want))
		}
	}
	if !reflect.DeepEqual(r.Config.MultiKueue, want.MultiKueue) {
		t.Errorf("KueueRender.Config.MultiKueue %s, want %s", show(r.Config.MultiKueue), show(want.MultiKueue))
	}

	// What a Deployment needs and the in-process configuration leaves out.
	icm := got.InternalCertManagement
	if icm == nil || !*icm.Enable || *icm.WebhookServiceName != "kueue-webhook-service" || *icm.WebhookSecretName != "kueue-webhook-server-cert" {
		t.Errorf("internalCertManagement %s, want enabled with kueue-webhook-service / kueue-webhook-server-cert", show(icm))
	}
	find(t, r.Objects, "Service", *icm.WebhookServiceName)
	find(t, r.Objects, "Secret", *icm.WebhookSecretName)
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "cert" && (v.Secret == nil || v.Secret.SecretName != *icm.WebhookSecretName) {
			t.Errorf("Deployment mounts certificates from %s, Kueue writes them to Secret %s", show(v.Secret), *icm.WebhookSecretName)
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		// Kueue's cert manager derives these names from the webhook Service.
		find(t, r.Objects, kind, "kueue-"+strings.ToLower(strings.TrimSuffix(kind, "WebhookConfiguration"))+"-webhook-configuration")
	}
	if le := got.LeaderElection; le == nil || !*le.LeaderElect || le.ResourceName != configapi.DefaultLeaderElectionID {
		t.Errorf("leaderElection %s, want leaderElect with Lease %s (the chart's default)", show(le), configapi.DefaultLeaderElectionID)
	}
	if got.Health.HealthProbeBindAddress != ":8081" || got.Metrics.BindAddress != ":8443" || *got.Webhook.Port != 9443 {
		t.Errorf("health %q metrics %q webhook port %d; want the chart's :8081 :8443 9443 (the probes and Services use them)", got.Health.HealthProbeBindAddress, got.Metrics.BindAddress, *got.Webhook.Port)
	}
	if mgr.ReadinessProbe == nil || mgr.ReadinessProbe.HTTPGet.Port.IntValue() != 8081 {
		t.Errorf("readiness probe %s, want port 8081", show(mgr.ReadinessProbe))
	}
	if got.ClientConnection == nil || *got.ClientConnection.QPS != 300 {
		t.Errorf("clientConnection %s, want the chart's qps 300 (v0.19.2)", show(got.ClientConnection))
	}
	for _, o := range r.Objects {
		if o.GetKind() == "CustomResourceDefinition" || strings.HasPrefix(o.GetKind(), "Cluster") || strings.HasSuffix(o.GetKind(), "WebhookConfiguration") || o.GetKind() == "APIService" {
			continue
		}
		if o.GetKind() == "RoleBinding" && o.GetName() == "kueue-visibility-server-auth-reader" {
			// The extension-apiserver-authentication reader binding lives in kube-system.
			continue
		}
		if o.GetNamespace() != "kueue-mk" {
			t.Errorf("%s %s: namespace %q, want kueue-mk", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
}

// TestRenderKueueOptions checks the options that change the rendering:
// release name, replicas, image and extra values; and the refusals.
func TestRenderKueueOptions(t *testing.T) {
	ctx := context.Background()
	opts, _ := renderCase(t)
	opts.ReleaseName = "mk"
	opts.Replicas = 2
	opts.Image = install.Image{Repository: "example.test/kueue", Tag: "dev"}
	opts.Values = map[string]any{"controllerManager": map[string]any{"nodeSelector": map[string]any{"role": "infra"}}}
	r, err := install.RenderKueue(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, r.Objects, "Deployment", "mk-controller-manager").Object, d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if *d.Spec.Replicas != 2 || c.Image != "example.test/kueue:dev" || c.ImagePullPolicy != corev1.PullIfNotPresent || d.Spec.Template.Spec.NodeSelector["role"] != "infra" {
		t.Errorf("replicas %d image %s %s nodeSelector %v; want 2, example.test/kueue:dev IfNotPresent, role=infra", *d.Spec.Replicas, c.Image, c.ImagePullPolicy, d.Spec.Template.Spec.NodeSelector)
	}
	if n := *r.Config.InternalCertManagement.WebhookServiceName; n != "mk-webhook-service" {
		t.Errorf("webhookServiceName %q, want mk-webhook-service", n)
	}
	find(t, r.Objects, "Service", "mk-webhook-service")

	// Leader election for several replicas: the durations reach Kueue's
	// configuration; unset fields keep Kueue's defaults.
	opts.LeaderElection = &componentconfig.LeaderElectionConfiguration{
		LeaseDuration: metav1.Duration{Duration: 6 * time.Second}, RenewDeadline: metav1.Duration{Duration: 4 * time.Second},
		RetryPeriod: metav1.Duration{Duration: time.Second},
	}
	r, err = install.RenderKueue(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if le := r.Config.LeaderElection; le == nil || !*le.LeaderElect || le.ResourceName != configapi.DefaultLeaderElectionID ||
		le.LeaseDuration.Duration != 6*time.Second || le.RenewDeadline.Duration != 4*time.Second || le.RetryPeriod.Duration != time.Second {
		t.Errorf("leaderElection %s, want leaderElect, Lease %s, 6s/4s/1s", show(le), configapi.DefaultLeaderElectionID)
	}

	for _, tc := range []struct {
		name  string
		edit  func(*install.KueueOptions)
		field string
	}{
		{"unresolved spec", func(o *install.KueueOptions) { o.Spec = topology.Spec{} }, "KueueOptions.Spec"},
		{"bad release name", func(o *install.KueueOptions) { o.ReleaseName = "Kueue_1" }, "KueueOptions.ReleaseName"},
		{"long release name", func(o *install.KueueOptions) { o.ReleaseName = strings.Repeat("k", 29) }, "KueueOptions.ReleaseName"},
		{"negative replicas", func(o *install.KueueOptions) { o.Replicas = -1 }, "KueueOptions.Replicas"},
		{"manager config in values", func(o *install.KueueOptions) { o.Values = map[string]any{"managerConfig": map[string]any{}} }, `KueueOptions.Values["managerConfig"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := renderCase(t)
			tc.edit(&o)
			_, err := install.RenderKueue(ctx, o)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
}

// TestRenderJobSet renders the chart of the pinned JobSet module: released
// image, CRD included.
func TestRenderJobSet(t *testing.T) {
	start := time.Now()
	r, err := install.RenderJobSet(context.Background(), install.JobSetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rendered %s in %s: %d objects: %s", r.Chart, time.Since(start).Round(time.Millisecond), len(r.Objects), countKinds(r.Objects))
	find(t, r.Objects, "CustomResourceDefinition", "jobsets.jobset.x-k8s.io")
	var images []string
	for _, o := range r.Objects {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			images = append(images, c.Image+" "+string(c.ImagePullPolicy))
		}
	}
	if want := []string{"registry.k8s.io/jobset/jobset:v0.12.0 IfNotPresent"}; !reflect.DeepEqual(images, want) {
		t.Errorf("JobSet images %q, want %q", images, want)
	}
}

// TestRenderOperators renders the LeaderWorkerSet and Kubeflow Trainer
// charts of the pinned modules: the released images at the modules'
// versions, the CRDs included, the Trainer without its JobSet subchart (the
// module does not vendor it), and a bad option named.
func TestRenderOperators(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		render func(context.Context, install.OperatorOptions) (*install.OperatorRender, error)
		crds   []string
		images []string
		field  string
	}{
		{"LWS", install.RenderLWS, []string{"leaderworkersets.leaderworkerset.x-k8s.io"}, []string{"registry.k8s.io/lws/lws:v0.9.0 IfNotPresent"}, "LWSOptions.Namespace"},
		{"Trainer", install.RenderTrainer, []string{"trainjobs.trainer.kubeflow.org", "clustertrainingruntimes.trainer.kubeflow.org", "trainingruntimes.trainer.kubeflow.org"},
			[]string{"ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.2.1 IfNotPresent"}, "TrainerOptions.Namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r, err := tc.render(ctx, install.OperatorOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("rendered %s in %s: %d objects: %s", r.Chart, time.Since(start).Round(time.Millisecond), len(r.Objects), countKinds(r.Objects))
			for _, crd := range tc.crds {
				find(t, r.Objects, "CustomResourceDefinition", crd)
			}
			var images []string
			for _, o := range r.Objects {
				if o.GetKind() != "Deployment" {
					continue
				}
				if strings.Contains(o.GetName(), "jobset") {
					t.Errorf("Deployment %s rendered: the JobSet subchart must be off", o.GetName())
				}
				d := &appsv1.Deployment{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
					t.Fatal(err)
				}
				for _, c := range d.Spec.Template.Spec.Containers {
					images = append(images, c.Image+" "+string(c.ImagePullPolicy))
				}
			}
			if !reflect.DeepEqual(images, tc.images) {
				t.Errorf("images %q, want %q", images, tc.images)
			}
			if _, err := tc.render(ctx, install.OperatorOptions{Namespace: "Not_A_Name"}); err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("a bad namespace: %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

// TestRenderKustomizedOperators renders the training-operator, the MPI
// operator, the AppWrapper controller and KubeRay from their pinned
// modules' kustomizations: the CRDs, the images the modules name (the
// AppWrapper's tagged with its module version), no Namespace object (Helm
// makes the release's), every namespaced object in the asked namespace,
// Image and Replicas applied, Values and a bad namespace refused naming the
// field.
func TestRenderKustomizedOperators(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		render func(context.Context, install.OperatorOptions) (*install.OperatorRender, error)
		crds   []string
		image  string
		field  string
	}{
		{"training-operator", install.RenderTrainingOperator, []string{"pytorchjobs.kubeflow.org", "tfjobs.kubeflow.org", "xgboostjobs.kubeflow.org", "paddlejobs.kubeflow.org", "jaxjobs.kubeflow.org"},
			"ghcr.io/kubeflow/training-v1/training-operator:v1-d6eb98e", "TrainingOperatorOptions"},
		{"MPI operator", install.RenderMPIOperator, []string{"mpijobs.kubeflow.org"}, "mpioperator/mpi-operator:0.8.2", "MPIOperatorOptions"},
		{"AppWrapper", install.RenderAppWrapper, []string{"appwrappers.workload.codeflare.dev"}, "quay.io/ibm/appwrapper:v1.2.2", "AppWrapperOptions"},
		{"KubeRay", install.RenderKubeRay, []string{"rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io"}, "quay.io/kuberay/operator:v1.6.2", "KubeRayOptions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r, err := tc.render(ctx, install.OperatorOptions{Namespace: "ops"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("rendered %s in %s: %d objects: %s", r.Chart, time.Since(start).Round(time.Millisecond), len(r.Objects), countKinds(r.Objects))
			for _, crd := range tc.crds {
				find(t, r.Objects, "CustomResourceDefinition", crd)
			}
			var images []string
			for _, o := range r.Objects {
				switch {
				case tc.name == "training-operator" && o.GetKind() == "CustomResourceDefinition" && o.GetName() == "mpijobs.kubeflow.org":
					t.Errorf("the training-operator's MPIJob v1 CRD rendered: it would take the MPI operator's CRD name")
				case o.GetKind() == "Namespace":
					t.Errorf("Namespace %s rendered: Helm makes the release's", o.GetName())
				case o.GetNamespace() != "" && o.GetNamespace() != "ops":
					t.Errorf("%s %s/%s rendered outside the asked namespace", o.GetKind(), o.GetNamespace(), o.GetName())
				case o.GetKind() == "Deployment":
					d := &appsv1.Deployment{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
						t.Fatal(err)
					}
					if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
						t.Errorf("Deployment %s: replicas %v, want 1", d.Name, d.Spec.Replicas)
					}
					images = append(images, d.Spec.Template.Spec.Containers[0].Image+" "+string(d.Spec.Template.Spec.Containers[0].ImagePullPolicy))
					if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); tc.name == "training-operator" && (strings.Contains(args, "mpijob") || !strings.Contains(args, "--enable-scheme=pytorchjob")) {
						t.Errorf("training-operator args %q: want every scheme but MPIJob enabled", args)
					}
				}
			}
			if want := []string{tc.image + " IfNotPresent"}; !reflect.DeepEqual(images, want) {
				t.Errorf("images %q, want %q", images, want)
			}
			r, err = tc.render(ctx, install.OperatorOptions{Image: install.Image{Repository: "mktk.local/op", Tag: "dev", PullPolicy: "Never"}, Replicas: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range r.Objects {
				if o.GetKind() == "Deployment" {
					d := &appsv1.Deployment{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
						t.Fatal(err)
					}
					if c := d.Spec.Template.Spec.Containers[0]; c.Image != "mktk.local/op:dev" || c.ImagePullPolicy != "Never" || *d.Spec.Replicas != 2 {
						t.Errorf("with Image and Replicas: %s %s, %d replicas", c.Image, c.ImagePullPolicy, *d.Spec.Replicas)
					}
				}
			}
			if _, err := tc.render(ctx, install.OperatorOptions{Values: map[string]any{"x": 1}}); err == nil || !strings.Contains(err.Error(), tc.field+".Values") {
				t.Errorf("Values: %v, want an error naming %s.Values", err, tc.field)
			}
			if _, err := tc.render(ctx, install.OperatorOptions{Namespace: "Not_A_Name"}); err == nil || !strings.Contains(err.Error(), tc.field+".Namespace") {
				t.Errorf("a bad namespace: %v, want an error naming %s.Namespace", err, tc.field)
			}
		})
	}
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// BenchmarkRenderKueue measures an offline render of the Kueue chart
// (locating and loading the chart included).
func BenchmarkRenderKueue(b *testing.B) {
	spec, err := topology.Options{Workers: 1}.Resolve()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := install.RenderKueue(context.Background(), install.KueueOptions{Spec: spec})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(r.Objects)), "objects")
	}
}

// TestRenderKueueVersion renders the chart of another Kueue release than
// the library's own: the chart and the image are that release's, and the
// version reads back from the Deployment as topology.ReadKueueFacts reads
// it (the image's tag).
func TestRenderKueueVersion(t *testing.T) {
	ctx := context.Background()
	opts, _ := renderCase(t)
	opts.Version = "v0.19.2"
	r, err := install.RenderKueue(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Chart != "kueue-0.19.2" {
		t.Errorf("chart %s, want kueue-0.19.2", r.Chart)
	}
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, r.Objects, "Deployment", "kueue-controller-manager").Object, d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.k8s.io/kueue/kueue:v0.19.2" {
		t.Errorf("image %s, want registry.k8s.io/kueue/kueue:v0.19.2", img)
	}
	opts.Version = "0.19"
	if _, err := install.RenderKueue(ctx, opts); err == nil || !strings.Contains(err.Error(), "KueueOptions.Version") {
		t.Errorf("a bad version: got %v, want an error naming KueueOptions.Version", err)
	}
}

// TestRenderKueueCredentialsPlugin: the plugin lands in Kueue's pod at the
// credentials provider's path (an emptyDir, an init container copying it
// from the plugin's image, the manager mounting it read-only there), the
// rest of the Deployment as the chart renders it; bad input is refused
// naming the field.
func TestRenderKueueCredentialsPlugin(t *testing.T) {
	ctx := context.Background()
	opts, _ := renderCase(t)
	plain, err := install.RenderKueue(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.CredentialsPlugin = &install.CredentialsPlugin{Image: install.Image{Repository: "example.test/secretreader", Tag: "v0.1.3"}, Source: "/secretreader-plugin"}
	r, err := install.RenderKueue(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	deployment := func(r *install.KueueRender) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, r.Objects, "Deployment", "kueue-controller-manager").Object, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	before, after := deployment(plain).Spec.Template.Spec, deployment(r).Spec.Template.Spec
	if n := len(after.InitContainers); n != 1 {
		t.Fatalf("%d init containers, want 1", n)
	}
	ic := after.InitContainers[0]
	if ic.Image != "example.test/secretreader:v0.1.3" || ic.ImagePullPolicy != corev1.PullIfNotPresent ||
		!slices.Equal(ic.Command, []string{"cp", "/secretreader-plugin", "/plugins/secretreader-plugin"}) ||
		len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0].MountPath != "/plugins" {
		t.Errorf("init container %s %s %q mounts %+v; want the image, cp to /plugins/secretreader-plugin, /plugins mounted", ic.Image, ic.ImagePullPolicy, ic.Command, ic.VolumeMounts)
	}
	vol := ic.VolumeMounts[0].Name
	var mgr corev1.Container
	for _, c := range after.Containers {
		if c.Name == "manager" {
			mgr = c
		}
	}
	if m := mgr.VolumeMounts[len(mgr.VolumeMounts)-1]; m.Name != vol || m.MountPath != "/plugins" || !m.ReadOnly {
		t.Errorf("the manager's last mount %+v, want %s at /plugins read-only", m, vol)
	}
	if len(after.Volumes) != len(before.Volumes)+1 || after.Volumes[len(after.Volumes)-1].EmptyDir == nil {
		t.Errorf("volumes %+v, want the chart's and one emptyDir", after.Volumes)
	}
	if len(r.Objects) != len(plain.Objects) {
		t.Errorf("%d objects with the plugin, %d without; want the same", len(r.Objects), len(plain.Objects))
	}
	if cmd := r.Config.MultiKueue.ClusterProfile.CredentialsProviders[0].ExecConfig.Command; cmd != "/plugins/secretreader-plugin" {
		t.Errorf("Kueue runs %q, want /plugins/secretreader-plugin", cmd)
	}

	for _, tc := range []struct {
		name  string
		edit  func(*install.KueueOptions)
		field string
	}{
		{"no image", func(o *install.KueueOptions) { o.CredentialsPlugin.Image.Repository = "" }, "CredentialsPlugin.Image.Repository"},
		{"relative source", func(o *install.KueueOptions) { o.CredentialsPlugin.Source = "secretreader-plugin" }, "CredentialsPlugin.Source"},
		{"no provider", func(o *install.KueueOptions) { o.Needs = topology.KueueNeeds{} }, "name no credentials provider"},
		{"two providers", func(o *install.KueueOptions) {
			o.Needs.CredentialsProviders = append(o.Needs.CredentialsProviders, o.Needs.CredentialsProviders[0])
		}, "2 credentials providers"},
		{"plugin at the root", func(o *install.KueueOptions) {
			o.Needs.CredentialsProviders[0].ExecConfig.Command = "/secretreader-plugin"
		}, "PluginCommand"},
		{"plugin in a chart mount", func(o *install.KueueOptions) {
			o.Needs.CredentialsProviders[0].ExecConfig.Command = "/visibility/secretreader-plugin"
		}, "overlaps the chart's mount /visibility"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := renderCase(t)
			o.CredentialsPlugin = &install.CredentialsPlugin{Image: install.Image{Repository: "example.test/secretreader"}, Source: "/secretreader-plugin"}
			tc.edit(&o)
			_, err := install.RenderKueue(ctx, o)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
}

// TestStepPlanGivesTheManagerAloneTheNeedsAndThePlugin: the manager's Kueue gets
// the connector's needs and the credentials plugin, a worker's neither (a
// worker with the ClusterProfile gate and no CRD would exit; the plugin has
// no provider to serve there).
func TestStepPlanGivesTheManagerAloneTheNeedsAndThePlugin(t *testing.T) {
	spec, err := topology.Options{Workers: 1}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	needs := topology.KueueNeeds{ClusterProfileCRD: true, FeatureGates: map[string]bool{"MultiKueueClusterProfile": true}}
	k := install.Step{Kueue: install.KueueOptions{CredentialsPlugin: &install.CredentialsPlugin{Image: install.Image{Repository: "example.test/plugin"}, Source: "/plugin"}}}
	mgr, wrk := k.Plan(spec, needs, topology.RoleManager, nil), k.Plan(spec, needs, topology.RoleWorker, nil)
	if !mgr.Kueue.Needs.ClusterProfileCRD || mgr.Kueue.CredentialsPlugin == nil {
		t.Errorf("manager plan: needs %+v, plugin %v; want both", mgr.Kueue.Needs, mgr.Kueue.CredentialsPlugin)
	}
	if wrk.Kueue.Needs.ClusterProfileCRD || len(wrk.Kueue.Needs.FeatureGates) > 0 || wrk.Kueue.CredentialsPlugin != nil {
		t.Errorf("worker plan: needs %+v, plugin %v; want neither", wrk.Kueue.Needs, wrk.Kueue.CredentialsPlugin)
	}
}
