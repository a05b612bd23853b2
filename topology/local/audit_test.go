package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// TestAuditPolicyAuditsOnlyTheWritesAttributionNeeds evaluates the policy
// with the API server's own policy code.
func TestAuditPolicyAuditsOnlyTheWritesAttributionNeeds(t *testing.T) {
	spec, err := topology.Options{Workers: 1, Kueue: topology.KueueOptions{
		Integrations: []string{topology.IntegrationBatchJob, topology.IntegrationJobSet},
	}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := auditPolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.LoadPolicyFromBytes(raw)
	if err != nil {
		t.Fatalf("the API server would refuse the policy: %v\n%s", err, raw)
	}
	ev := policy.NewPolicyRuleEvaluator(p)
	ns := spec.Kueue.Namespace
	for _, c := range []struct {
		verb, group, resource, sub, namespace string
		want                                  auditinternal.Level
	}{
		{"create", "kueue.x-k8s.io", "workloads", "", "default", auditinternal.LevelMetadata},
		{"patch", "kueue.x-k8s.io", "workloads", "status", "default", auditinternal.LevelMetadata},
		{"delete", "batch", "jobs", "", "default", auditinternal.LevelMetadata},
		{"update", "batch", "jobs", "status", "default", auditinternal.LevelMetadata},
		{"create", "jobset.x-k8s.io", "jobsets", "", "default", auditinternal.LevelMetadata},
		{"update", "kueue.x-k8s.io", "multikueueclusters", "status", "", auditinternal.LevelMetadata},
		{"update", "kueue.x-k8s.io", "clusterqueues", "", "", auditinternal.LevelMetadata},
		{"update", "multicluster.x-k8s.io", "clusterprofiles", "", ns, auditinternal.LevelMetadata},
		{"update", "", "secrets", "", ns, auditinternal.LevelMetadata},
		// Not audited: reads, other namespaces' Secrets, kinds not recorded.
		{"get", "kueue.x-k8s.io", "workloads", "", "default", auditinternal.LevelNone},
		{"watch", "batch", "jobs", "", "", auditinternal.LevelNone},
		{"list", "", "secrets", "", ns, auditinternal.LevelNone},
		{"update", "", "secrets", "", "default", auditinternal.LevelNone},
		{"create", "ray.io", "rayjobs", "", "default", auditinternal.LevelNone},
		{"create", "", "pods", "", "default", auditinternal.LevelMetadata},
		{"create", "", "pods", "binding", "default", auditinternal.LevelMetadata},
		{"patch", "", "nodes", "status", "", auditinternal.LevelMetadata},
		{"get", "", "pods", "", "default", auditinternal.LevelNone},
		{"create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", auditinternal.LevelNone},
	} {
		got := ev.EvaluatePolicyRule(authorizer.AttributesRecord{
			User: &user.DefaultInfo{Name: "x"}, Verb: c.verb, APIGroup: c.group, Resource: c.resource,
			Subresource: c.sub, Namespace: c.namespace, ResourceRequest: true,
		})
		if got.Level != c.want {
			t.Errorf("%s %s/%s (%s) in %q: level %s, want %s", c.verb, c.group, c.resource, c.sub, c.namespace, got.Level, c.want)
		}
	}
}

// TestAuditLogReadsAppendedLinesOnly feeds the reader a log written in
// pieces, with a line cut in the middle and a failed request.
func TestAuditLogReadsAppendedLinesOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	a := &auditLog{path: path}
	ctx := context.Background()
	if w, err := a.Writes(ctx, time.Time{}); err != nil || len(w) != 0 {
		t.Fatalf("before the file exists: %v, %v", w, err)
	}
	create := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"1","stage":"ResponseComplete","requestURI":"/apis/batch/v1/namespaces/default/jobs","verb":"create","user":{"username":"system:serviceaccount:kueue-system:multikueue-manager"},"userAgent":"x","objectRef":{"resource":"jobs","namespace":"default","name":"a","apiGroup":"batch","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-01-02T10:00:00.100000Z","stageTimestamp":"2026-01-02T10:00:00.105000Z"}` + "\n"
	conflict := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"2","stage":"ResponseComplete","verb":"update","user":{"username":"kueue"},"objectRef":{"resource":"jobs","namespace":"default","name":"a","apiGroup":"batch"},"responseStatus":{"metadata":{},"code":409},"requestReceivedTimestamp":"2026-01-02T10:00:01.000000Z","stageTimestamp":"2026-01-02T10:00:01.000000Z"}` + "\n"
	status := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"3","stage":"ResponseComplete","verb":"update","user":{"username":"mktk-agent"},"objectRef":{"resource":"jobs","namespace":"default","name":"a","uid":"u1","apiGroup":"batch","subresource":"status"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-02T10:00:02.000000Z","stageTimestamp":"2026-01-02T10:00:02.001000Z"}` + "\n"
	appendTo := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendTo(create + conflict + status[:40])
	w, err := a.Writes(ctx, time.Time{})
	if err != nil || len(w) != 1 { // the 409 is not a write
		t.Fatalf("first read: %+v, %v", w, err)
	}
	if got := w[0]; got.Verb != "create" || got.Resource.Resource != "jobs" || got.Name != "a" || got.Role != "" ||
		got.User != "system:serviceaccount:kueue-system:multikueue-manager" || got.Completed.Sub(got.Received) != 5*time.Millisecond {
		t.Errorf("create parsed as %+v", got)
	}
	appendTo(status[40:])
	w, err = a.Writes(ctx, time.Time{})
	if err != nil || len(w) != 2 {
		t.Fatalf("second read: %+v, %v", w, err)
	}
	if got := w[1]; got.Subresource != "status" || got.UID != "u1" || got.Role != topology.WriterAgent {
		t.Errorf("status update parsed as %+v", got)
	}
	since, _ := time.Parse(time.RFC3339, "2026-01-02T10:00:01Z")
	if w, _ := a.Writes(ctx, since); len(w) != 1 || w[0].Verb != "update" {
		t.Errorf("since filter: %+v", w)
	}
}

// TestAuditPolicyCoversWhatAttributionNeeds: the provider derives what it
// audits from the integrations without importing observe; it must cover
// every resource observe.AuditedResources says attribution needs.
func TestAuditPolicyCoversWhatAttributionNeeds(t *testing.T) {
	for _, integrations := range [][]string{nil, {topology.IntegrationBatchJob, topology.IntegrationJobSet, topology.IntegrationRayJob, topology.IntegrationRayCluster}} {
		need, err := observe.AuditedResources(integrations)
		if err != nil {
			t.Fatal(err)
		}
		have := auditedResources(integrations)
		for _, gr := range need {
			if !slices.Contains(have, gr) {
				t.Errorf("integrations %v: the audit policy leaves out %s, which attribution needs", integrations, gr)
			}
		}
	}
}
