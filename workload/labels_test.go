package workload

import (
	"testing"

	"sigs.k8s.io/kueue/pkg/controller/constants"
	podconstants "sigs.k8s.io/kueue/pkg/controller/jobs/pod/constants"
)

// TestLabelsAreKueues: the label keys spelled out in job.go are the ones
// the Kueue module declares.
func TestLabelsAreKueues(t *testing.T) {
	for _, tc := range []struct{ ours, kueues string }{
		{QueueLabel, constants.QueueLabel},
		{PodGroupNameLabel, podconstants.GroupNameLabel},
		{PodGroupTotalCountAnnotation, podconstants.GroupTotalCountAnnotation},
		{PodGroupRetriableAnnotation, podconstants.RetriableInGroupAnnotationKey},
		{PriorityClassLabel, constants.WorkloadPriorityClassLabel},
	} {
		if tc.ours != tc.kueues {
			t.Errorf("label %q; Kueue declares %q", tc.ours, tc.kueues)
		}
	}
}
