package observe

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// KindClusterQueue: the Observer records each ClusterQueue's quota on every
// cluster, so that quota judgements use what the clusters say, not what a
// test restated.
const KindClusterQueue Kind = "ClusterQueue"

// QuotaSet is a ClusterQueue's quota as created or changed. The event's Usage
// holds the limit per resource (see QuotaLimit); Detail renders it, with
// "unbounded" resources named when the queue may borrow without a limit.
const QuotaSet Type = "QuotaSet"

// QuotaLimit is the most a ClusterQueue may admit of each resource, summed
// over its flavors: the nominal quota plus the borrowing limit when the queue
// is in a cohort. A resource the queue may borrow without limit (a cohort and
// no borrowingLimit) is left out: nothing bounds it on the queue alone.
// Resources the queue does not cover map to zero. Summing flavors can miss a
// violation within one flavor; it never reports one that did not happen.
func QuotaLimit(cq *kueue.ClusterQueue) (limit corev1.ResourceList, unbounded []corev1.ResourceName) {
	limit = corev1.ResourceList{}
	inCohort := cq.Spec.CohortName != ""
	skip := map[corev1.ResourceName]bool{}
	for _, rg := range cq.Spec.ResourceGroups {
		for _, n := range rg.CoveredResources {
			if _, ok := limit[n]; !ok {
				limit[n] = resource.Quantity{}
			}
		}
		for _, fq := range rg.Flavors {
			for _, r := range fq.Resources {
				q := limit[r.Name]
				q.Add(r.NominalQuota)
				if inCohort {
					if r.BorrowingLimit == nil {
						skip[r.Name] = true
					} else {
						q.Add(*r.BorrowingLimit)
					}
				}
				limit[r.Name] = q
			}
		}
	}
	for n := range skip {
		delete(limit, n)
		unbounded = append(unbounded, n)
	}
	slices.Sort(unbounded)
	return limit, unbounded
}

func clusterQueueSnapshot(cq *kueue.ClusterQueue) *snapshot {
	limit, unbounded := QuotaLimit(cq)
	s := &snapshot{uid: cq.UID, flags: map[Type]bool{}, reason: map[Type]string{}, usage: limit}
	s.jobStatus = renderQuota(limit, unbounded)
	return s
}

func renderQuota(limit corev1.ResourceList, unbounded []corev1.ResourceName) string {
	names := make([]string, 0, len(limit))
	for n := range limit {
		names = append(names, string(n))
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names)+len(unbounded))
	for _, n := range names {
		q := limit[corev1.ResourceName(n)]
		parts = append(parts, fmt.Sprintf("%s=%s", n, q.String()))
	}
	for _, n := range unbounded {
		parts = append(parts, string(n)+"=unbounded(cohort)")
	}
	return strings.Join(parts, ",")
}
