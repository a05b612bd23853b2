package observe

import (
	"testing"

	kueueconstants "sigs.k8s.io/kueue/pkg/constants"
	controllerconstants "sigs.k8s.io/kueue/pkg/controller/constants"
	podconstants "sigs.k8s.io/kueue/pkg/controller/jobs/pod/constants"
)

// TestLabelsAreKueues: the label keys (and the pod integration's gate)
// spelled out in snapshot.go and pods.go are the ones the Kueue module
// declares.
func TestLabelsAreKueues(t *testing.T) {
	for _, tc := range []struct{ ours, kueues string }{
		{LabelPrebuiltWorkload, controllerconstants.PrebuiltWorkloadLabel},
		{LabelJobUID, controllerconstants.JobUIDLabel},
		{AnnotationComponentIndex, controllerconstants.ComponentWorkloadIndexAnnotation},
		{LabelManaged, kueueconstants.ManagedByKueueLabelKey},
		{LabelPodGroup, podconstants.GroupNameLabel},
		{PodAdmissionGate, podconstants.SchedulingGateName},
	} {
		if tc.ours != tc.kueues {
			t.Errorf("label %q; Kueue declares %q", tc.ours, tc.kueues)
		}
	}
}
