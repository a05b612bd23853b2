package observe

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// WorkloadOf reads through r (a cluster's client, or an Observer's Reader
// for its cache) the Workload Kueue made for the job object of UID jobUID
// in namespace: the one labelled LabelJobUID=jobUID, else (a pod group's
// Workload, which serves several pods and carries no such label) the one
// that names it among its owners; the oldest if there are several. Where
// there is none yet the error says so; a caller waiting for it polls
// WorkloadOf.
func WorkloadOf(ctx context.Context, r client.Reader, namespace string, jobUID types.UID) (*kueue.Workload, error) {
	wls, err := WorkloadsOf(ctx, r, namespace, jobUID)
	if err != nil {
		return nil, err
	}
	return &wls[0], nil
}

// WorkloadsOf is WorkloadOf for a job object Kueue admits as several
// Workloads (a LeaderWorkerSet, one per group; see WorkloadCount): all of
// them, oldest first. Where there is none yet the error says so.
func WorkloadsOf(ctx context.Context, r client.Reader, namespace string, jobUID types.UID) ([]kueue.Workload, error) {
	if jobUID == "" {
		return nil, fmt.Errorf("no job UID to find the Workload of in namespace %s", namespace)
	}
	var wls kueue.WorkloadList
	if err := r.List(ctx, &wls, client.InNamespace(namespace), client.MatchingLabels{LabelJobUID: string(jobUID)}); err != nil {
		return nil, err
	}
	if len(wls.Items) == 0 {
		var all kueue.WorkloadList
		if err := r.List(ctx, &all, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		for _, wl := range all.Items {
			if slices.ContainsFunc(wl.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == jobUID }) {
				wls.Items = append(wls.Items, wl)
			}
		}
	}
	if len(wls.Items) == 0 {
		return nil, fmt.Errorf("no Workload labelled %s=%s or owned by it yet", LabelJobUID, jobUID)
	}
	slices.SortStableFunc(wls.Items, func(a, b kueue.Workload) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return wls.Items, nil
}
