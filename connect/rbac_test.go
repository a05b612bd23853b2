package connect_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/topology"
)

var (
	jobVerbs    = []string{"create", "delete", "get", "list", "watch"}
	statusVerbs = []string{"get"}
	workloads   = []rbacv1.PolicyRule{
		{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads"}, Verbs: jobVerbs},
		{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads/status"}, Verbs: []string{"get", "patch", "update"}},
	}
)

func rules(group string, resources ...string) []rbacv1.PolicyRule {
	status := make([]string, len(resources))
	for i, r := range resources {
		status[i] = r + "/status"
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{group}, Resources: resources, Verbs: jobVerbs},
		{APIGroups: []string{group}, Resources: status, Verbs: statusVerbs},
	}
}

func TestWorkerRules(t *testing.T) {
	for _, tc := range []struct {
		name         string
		integrations []string
		want         []rbacv1.PolicyRule
	}{
		{name: "none: Workloads only", want: workloads},
		{
			name:         "batch/Job",
			integrations: []string{topology.IntegrationBatchJob},
			want:         slices.Concat(workloads, rules("batch", "jobs")),
		},
		{
			name:         "JobSet and Job, groups in name order",
			integrations: []string{topology.IntegrationJobSet, topology.IntegrationBatchJob},
			want:         slices.Concat(workloads, rules("batch", "jobs"), rules("jobset.x-k8s.io", "jobsets")),
		},
		{
			name:         "Ray kinds share one rule per group",
			integrations: []string{topology.IntegrationRayJob, "ray.io/rayservice", topology.IntegrationRayCluster},
			want:         slices.Concat(workloads, rules("ray.io", "rayclusters", "rayjobs", "rayservices")),
		},
		{
			name:         "Kubeflow trainers, duplicates once",
			integrations: []string{"kubeflow.org/tfjob", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/mpijob"},
			want:         slices.Concat(workloads, rules("kubeflow.org", "mpijobs", "pytorchjobs", "tfjobs")),
		},
		{
			name:         "pods are in the core group",
			integrations: []string{"pod", "statefulset"},
			want:         slices.Concat(workloads, rules("", "pods"), rules("apps", "statefulsets")),
		},
		{
			name:         "an unknown integration is skipped",
			integrations: []string{"example.com/widget", topology.IntegrationBatchJob},
			want:         slices.Concat(workloads, rules("batch", "jobs")),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.integrations)
			got := connect.WorkerRules(in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WorkerRules(%q) (-want +got):\n%s", tc.integrations, diff)
			}
			if !slices.Equal(in, tc.integrations) {
				t.Errorf("WorkerRules changed its argument: %q, was %q", in, tc.integrations)
			}
		})
	}
}

// No rule grants update or patch of a job object, any Secret, or anything
// cluster-wide beyond the listed resources.
func TestWorkerRulesGrantNoWrites(t *testing.T) {
	all := []string{topology.IntegrationBatchJob, topology.IntegrationJobSet, topology.IntegrationRayJob,
		topology.IntegrationRayCluster, "ray.io/rayservice", "kubeflow.org/mpijob", "trainer.kubeflow.org/trainjob",
		"workload.codeflare.dev/appwrapper", "pod", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"}
	for _, r := range connect.WorkerRules(all) {
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
			t.Errorf("wildcard in %+v", r)
		}
		for _, res := range r.Resources {
			if res == "secrets" {
				t.Errorf("Secrets granted: %+v", r)
			}
			for _, v := range r.Verbs {
				if (v == "update" || v == "patch") && res != "workloads/status" {
					t.Errorf("%s on %s granted", v, res)
				}
			}
		}
	}
}
