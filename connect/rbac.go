package connect

import (
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/multikueue-testkit/testkit/topology"
)

// jobResource maps a Kueue integration to the API group and resource that
// the MultiKueue manager creates, watches and deletes on a worker.
func jobResource(integration string) (group, res string, ok bool) {
	switch integration {
	case topology.IntegrationBatchJob:
		return "batch", "jobs", true
	case topology.IntegrationJobSet:
		return "jobset.x-k8s.io", "jobsets", true
	case topology.IntegrationRayJob:
		return "ray.io", "rayjobs", true
	case topology.IntegrationRayCluster:
		return "ray.io", "rayclusters", true
	case topology.IntegrationRayService:
		return "ray.io", "rayservices", true
	case topology.IntegrationMPIJob, topology.IntegrationPyTorchJob, topology.IntegrationTFJob,
		topology.IntegrationXGBoostJob, topology.IntegrationPaddleJob, topology.IntegrationJAXJob:
		return "kubeflow.org", strings.TrimPrefix(integration, "kubeflow.org/") + "s", true
	case topology.IntegrationTrainJob:
		return "trainer.kubeflow.org", "trainjobs", true
	case topology.IntegrationAppWrapper:
		return "workload.codeflare.dev", "appwrappers", true
	case topology.IntegrationPod:
		return "", "pods", true
	case topology.IntegrationStatefulSet:
		return "apps", "statefulsets", true
	case topology.IntegrationLeaderWorkerSet:
		return "leaderworkerset.x-k8s.io", "leaderworkersets", true
	}
	return "", "", false
}

// WorkerRules returns the least-privilege ClusterRole rules MultiKueue needs on
// a worker for the given integrations: the job resources in use (and their
// status), and Kueue Workloads (and their status). Unknown integration names
// are skipped; their objects would then be refused by the worker, which the
// MultiKueueCluster reports.
func WorkerRules(integrations []string) []rbacv1.PolicyRule {
	verbs := []string{"create", "delete", "get", "list", "watch"}
	statusVerbs := []string{"get"}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads"}, Verbs: verbs},
		{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads/status"}, Verbs: []string{"get", "patch", "update"}},
	}
	byGroup := map[string][]string{}
	for _, in := range integrations {
		if g, r, ok := jobResource(in); ok {
			byGroup[g] = append(byGroup[g], r)
		}
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		res := dedupe(byGroup[g])
		status := make([]string, len(res))
		for i, r := range res {
			status[i] = r + "/status"
		}
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{g}, Resources: res, Verbs: verbs},
			rbacv1.PolicyRule{APIGroups: []string{g}, Resources: status, Verbs: statusVerbs},
		)
	}
	return rules
}

func dedupe(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, v := range in {
		if i == 0 || v != in[i-1] {
			out = append(out, v)
		}
	}
	return out
}
