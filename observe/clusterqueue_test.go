package observe

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func TestQuotaLimit(t *testing.T) {
	q := resource.MustParse
	cq := func(cohort string, borrow *resource.Quantity) *kueue.ClusterQueue {
		return &kueue.ClusterQueue{Spec: kueue.ClusterQueueSpec{
			CohortName: kueue.CohortReference(cohort),
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{"cpu", "memory"},
				Flavors: []kueue.FlavorQuotas{
					{Name: "a", Resources: []kueue.ResourceQuota{{Name: "cpu", NominalQuota: q("2"), BorrowingLimit: borrow}, {Name: "memory", NominalQuota: q("1Gi"), BorrowingLimit: borrow}}},
					{Name: "b", Resources: []kueue.ResourceQuota{{Name: "cpu", NominalQuota: q("3"), BorrowingLimit: borrow}, {Name: "memory", NominalQuota: q("1Gi"), BorrowingLimit: borrow}}},
				},
			}},
		}}
	}
	for _, tc := range []struct {
		name      string
		cq        *kueue.ClusterQueue
		want      string
		unbounded int
	}{
		{"flavors summed, no cohort", cq("", nil), "cpu=5,memory=2Gi", 0},
		{"cohort with a borrowing limit", cq("team", ptr.To(q("1"))), "cpu=7,memory=2147483650", 0},
		{"cohort without a borrowing limit: not bounded on the queue", cq("team", nil), "cpu=unbounded(cohort),memory=unbounded(cohort)", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit, unbounded := QuotaLimit(tc.cq)
			if got := renderQuota(limit, unbounded); got != tc.want {
				t.Errorf("QuotaLimit = %s, want %s", got, tc.want)
			}
			if len(unbounded) != tc.unbounded {
				t.Errorf("unbounded = %v, want %d", unbounded, tc.unbounded)
			}
		})
	}
}
