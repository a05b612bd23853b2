package capz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
)

func validOptions() Options {
	return Options{
		Management:        existing.RESTConfig("bootstrap", &rest.Config{Host: "https://127.0.0.1:1"}),
		ClusterClass:      ClassRef{Name: "aks"},
		KubernetesVersion: "v1.33.2",
		Manager:           ClusterSpec{Name: "mk-manager"},
		Workers:           []ClusterSpec{{Name: "mk-worker-1"}, {Name: "mk-worker-2"}},
	}
}

// Bad input gets one clear error naming the field.
func TestOptionsErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no management", func(o *Options) { o.Management = existing.Cluster{} }, "Options.Management.Config: nil"},
		{"no class", func(o *Options) { o.ClusterClass.Name = "" }, "Options.ClusterClass.Name: empty"},
		{"no version", func(o *Options) { o.KubernetesVersion = "" }, "Options.KubernetesVersion: empty"},
		{"bad version", func(o *Options) { o.KubernetesVersion = "1.33" }, `Options.KubernetesVersion: "1.33" is not a version`},
		{"no workers", func(o *Options) { o.Workers = nil }, "Options.Workers: no worker Cluster"},
		{"bad name", func(o *Options) { o.Workers[1].Name = "Worker_2" }, `Options.Workers[1].Name: "Worker_2" is not a valid Cluster name`},
		{"duplicate", func(o *Options) { o.Workers[1].Name = "mk-manager" }, `Options.Workers[1].Name: duplicate Cluster name "mk-manager" (also Options.Manager)`},
		{"pool without class", func(o *Options) { o.Workers[0].MachinePools = []MachinePool{{Name: "mp-0"}} }, "Options.Workers[0].MachinePools[0].Class: empty"},
		{"replicas and autoscaler", func(o *Options) {
			o.MachinePools = []MachinePool{{Name: "mp-0", Class: "default-system", Replicas: 2, MinSize: 1, MaxSize: 3}}
		}, "Options.MachinePools[0].Replicas: 2 set together with MinSize/MaxSize"},
		{"min above max", func(o *Options) {
			o.Manager.MachinePools = []MachinePool{{Name: "mp-0", Class: "c", MinSize: 4, MaxSize: 3}}
		}, "Options.Manager.MachinePools[0].MinSize: 4 is above MaxSize 3"},
		{"min without max", func(o *Options) { o.MachinePools = []MachinePool{{Name: "mp-0", Class: "c", MinSize: 1}} }, "Options.MachinePools[0].MaxSize: 0 with MinSize 1"},
		{"variable not JSON", func(o *Options) { o.Variables = map[string]any{"f": func() {}} }, `Options.Variables["f"]: not JSON`},
		{"reserved label", func(o *Options) { o.Labels = map[string]string{LabelRole: "x"} }, `Options.Labels["multikueue-testkit/role"]: set by this package`},
		{"bad label", func(o *Options) { o.Workers[0].Labels = map[string]string{"a": "b c"} }, `Options.Workers[0].Labels["a"]: value "b c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.edit(&o)
			err := o.resolve()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want it to contain %q", err, tc.want)
			}
		})
	}
	o := validOptions()
	if err := o.resolve(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	if o.Namespace != "default" || o.ClusterClass.Namespace != "default" || len(o.MachinePools) != 2 || o.ReadyTimeout != DefaultReadyTimeout {
		t.Errorf("defaults not applied: %+v", o)
	}
}

// The Cluster carries the class, version, pools (replicas, or autoscaler
// annotations and no replicas), merged variables and labels.
func TestClusterObject(t *testing.T) {
	o := validOptions()
	o.ClusterClass.Namespace = "capz-classes"
	o.Variables = map[string]any{"location": "westeurope", "vmSize": "Standard_D2s_v3"}
	o.Labels = map[string]string{"suite": "mk"}
	o.Workers[0].Variables = map[string]any{"vmSize": "Standard_D4s_v3", "zones": []any{"1", "2"}}
	o.Workers[0].MachinePools = []MachinePool{
		{Name: "mp-0", Class: "default-system", Replicas: 1},
		{Name: "mp-1", Class: "default-worker", MinSize: 1, MaxSize: 5},
	}
	if err := o.resolve(); err != nil {
		t.Fatal(err)
	}
	u, err := o.clusterFor(o.Workers[0], topology.RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	str := func(path ...string) string {
		s, _, _ := unstructured.NestedString(u.Object, path...)
		return s
	}
	if u.GetAPIVersion() != "cluster.x-k8s.io/v1beta2" || u.GetKind() != "Cluster" || u.GetName() != "mk-worker-1" || u.GetNamespace() != "default" {
		t.Errorf("object %s %s %s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
	}
	if got := u.GetLabels(); got[LabelRole] != "worker" || got[LabelManager] != "mk-manager" || got["suite"] != "mk" {
		t.Errorf("labels %v", got)
	}
	if str("spec", "topology", "classRef", "name") != "aks" || str("spec", "topology", "classRef", "namespace") != "capz-classes" || str("spec", "topology", "version") != "v1.33.2" {
		t.Errorf("topology %v", u.Object["spec"])
	}
	pools, _, _ := unstructured.NestedSlice(u.Object, "spec", "topology", "workers", "machinePools")
	if len(pools) != 2 {
		t.Fatalf("machinePools %v", pools)
	}
	p0, p1 := pools[0].(map[string]any), pools[1].(map[string]any)
	if p0["replicas"] != int64(1) || p0["class"] != "default-system" || p0["name"] != "mp-0" {
		t.Errorf("pool 0 %v", p0)
	}
	if _, has := p1["replicas"]; has {
		t.Errorf("autoscaled pool has replicas: %v", p1)
	}
	ann, _, _ := unstructured.NestedStringMap(p1, "metadata", "annotations")
	if ann[AnnotationAutoscalerMin] != "1" || ann[AnnotationAutoscalerMax] != "5" {
		t.Errorf("pool 1 annotations %v", ann)
	}
	vars, _, _ := unstructured.NestedSlice(u.Object, "spec", "topology", "variables")
	want := []string{`location="westeurope"`, `vmSize="Standard_D4s_v3"`, `zones=["1","2"]`}
	if len(vars) != len(want) {
		t.Fatalf("variables %v", vars)
	}
	for i, v := range vars {
		m := v.(map[string]any)
		got := m["name"].(string) + "=" + mustJSON(t, m["value"])
		if got != want[i] {
			t.Errorf("variable %d = %s; want %s", i, got, want[i])
		}
	}
	// The class namespace is left out when it is the Clusters' own.
	o2 := validOptions()
	_ = o2.resolve()
	u2, _ := o2.clusterFor(o2.Manager, topology.RoleManager)
	if _, has, _ := unstructured.NestedString(u2.Object, "spec", "topology", "classRef", "namespace"); has {
		t.Errorf("classRef.namespace set for a class in the Clusters' namespace: %v", u2.Object["spec"])
	}
}

// What is missing names each condition, the Secret and each pool.
func TestMissingNamesWhatIsNotReady(t *testing.T) {
	st := clusterState{
		conditions: map[string]metav1.Condition{
			"InfrastructureReady":   {Type: "InfrastructureReady", Status: metav1.ConditionTrue},
			"ControlPlaneAvailable": {Type: "ControlPlaneAvailable", Status: metav1.ConditionFalse, Reason: "NotAvailable", Message: "waiting"},
		},
		pools: []poolState{
			{pool: MachinePool{Name: "mp-0", Replicas: 2}, object: "c-mp-0", ready: 1},
			{pool: MachinePool{Name: "mp-1", Replicas: 1}},
			{pool: MachinePool{Name: "mp-2", MinSize: 0, MaxSize: 3}, object: "c-mp-2"},
		},
	}
	got := strings.Join(st.missing("ns", "c"), "; ")
	for _, want := range []string{
		"condition ControlPlaneInitialized not reported",
		"condition ControlPlaneAvailable is False (NotAvailable: waiting)",
		"Secret ns/c-kubeconfig not found",
		"MachinePool c-mp-0 (pool mp-0): 1 of 2 replicas ready",
		"no MachinePool for topology pool mp-1 yet",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing = %q; want it to contain %q", got, want)
		}
	}
	if strings.Contains(got, "mp-2") || strings.Contains(got, "InfrastructureReady") {
		t.Errorf("missing = %q; an autoscaled pool at min size 0 and a True condition are not missing", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A Cluster that can never be ready stops the other waits at once (their
// "stopped" errors left out); timeouts do not stop the others, so that
// every late Cluster is named.
func TestWaitAll(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	err := waitAll(ctx, 2, func(ctx context.Context, i int) error {
		if i == 0 {
			return errors.New("Cluster default/a is gone")
		}
		return poll.Until(ctx, time.Minute, "Cluster default/b", func(context.Context) error { return errors.New("not ready") })
	})
	if err == nil || err.Error() != "Cluster default/a is gone" || time.Since(start) > 10*time.Second {
		t.Errorf("err = %v after %s; want only a's error, at once", err, time.Since(start))
	}
	err = waitAll(ctx, 2, func(ctx context.Context, i int) error {
		return poll.Until(ctx, time.Duration(i+1)*200*time.Millisecond, fmt.Sprintf("Cluster default/c%d", i), func(context.Context) error { return errors.New("not ready") })
	})
	if err == nil || !strings.Contains(err.Error(), "default/c0") || !strings.Contains(err.Error(), "default/c1") {
		t.Errorf("err = %v; want both timeouts", err)
	}
}
