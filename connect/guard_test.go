package connect

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/multikueue-testkit/testkit/topology"
)

// The guard matches MultiKueue's ServiceAccount only, UPDATE and DELETE
// only, of Workloads and the job resources in use (with their status), and
// lets through objects carrying the origin label.
func TestGuardPolicySpec(t *testing.T) {
	sa := types.NamespacedName{Namespace: "kueue-system", Name: "multikueue-manager"}
	spec := guardPolicySpec(sa, []string{topology.IntegrationJobSet, "no-such-integration"})
	var got []string
	for _, r := range spec.MatchConstraints.ResourceRules {
		if !slices.Equal(opsOf(r.Operations), []string{"UPDATE", "DELETE"}) {
			t.Errorf("rule %v: operations %v", r.Rule, r.Operations)
		}
		for _, res := range r.Resources {
			got = append(got, r.APIGroups[0]+"/"+res)
		}
	}
	want := []string{"kueue.x-k8s.io/workloads", "kueue.x-k8s.io/workloads/status", "batch/jobs", "batch/jobs/status", "jobset.x-k8s.io/jobsets", "jobset.x-k8s.io/jobsets/status"}
	if !slices.Equal(got, want) {
		t.Errorf("resources %v, want %v", got, want)
	}
	if len(spec.MatchConditions) != 1 || spec.MatchConditions[0].Expression != `request.userInfo.username == "system:serviceaccount:kueue-system:multikueue-manager"` {
		t.Errorf("match conditions %+v", spec.MatchConditions)
	}
	v := spec.Validations[0]
	if !strings.Contains(v.Expression, `"kueue.x-k8s.io/multikueue-origin" in oldObject.metadata.labels`) || !strings.Contains(v.MessageExpression, "testkit guard:") {
		t.Errorf("validation %+v", v)
	}
	if GuardName(sa) != "multikueue-guard.kueue-system.multikueue-manager" {
		t.Errorf("GuardName = %q", GuardName(sa))
	}
}

func opsOf[T ~string](ops []T) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = string(o)
	}
	return out
}
