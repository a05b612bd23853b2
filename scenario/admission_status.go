package scenario

import (
	"context"
	"maps"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// kueueAdmissionManager is the field manager of Kueue's admission writes
// (pkg/constants.AdmissionName).
const kueueAdmissionManager = "kueue-admission"

// admissionManagedConditions are the Workload conditions Kueue's admission
// apply carries (v0.19.2, pkg/workload/patching).
var admissionManagedConditions = []string{
	kueue.WorkloadQuotaReserved, kueue.WorkloadBlockedOnPreemptionGates, kueue.WorkloadEvicted,
	kueue.WorkloadAdmitted, kueue.WorkloadPreempted, kueue.WorkloadRequeued,
	kueue.WorkloadDeactivationTarget, kueue.WorkloadFinished, kueue.WorkloadPodsReady,
}

// applyAdmissionStatus writes wl's status as Kueue's own admission writers
// do (pkg/workload/patching.PatchAdmissionStatus of v0.19.2, strict): update
// changes a copy of wl, then a server-side apply as field manager
// kueue-admission, with ownership forced and wl's resourceVersion (a
// conflict when wl is stale), carries the whole admission status: the
// admission, requeue state, resource requests, the admission-managed
// conditions, scheduling stats, clusterName, nominatedClusterNames,
// unhealthy nodes, preemption gates and the admission checks. A field that
// manager owns and the apply left out would be removed, so all of it is
// sent, as Kueue sends it. It is written here from Kueue's API types rather
// than imported, so that the library builds against any Kueue release.
func applyAdmissionStatus(ctx context.Context, c client.Client, wl *kueue.Workload, update func(*kueue.Workload)) error {
	w := wl.DeepCopy()
	update(w)
	p := &kueue.Workload{
		TypeMeta: metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{
			UID: w.UID, Name: w.Name, Namespace: w.Namespace, Generation: w.Generation,
			ResourceVersion: w.ResourceVersion,
			Annotations:     maps.Clone(w.Annotations), Labels: maps.Clone(w.Labels),
		},
	}
	st := &p.Status
	st.Admission = w.Status.Admission.DeepCopy()
	if rs := w.Status.RequeueState; rs != nil && (rs.Count != nil || rs.RequeueAt != nil) {
		st.RequeueState = rs.DeepCopy()
	}
	if st.Admission != nil {
		st.ResourceRequests = []kueue.PodSetRequest{}
	} else {
		for _, rr := range w.Status.ResourceRequests {
			st.ResourceRequests = append(st.ResourceRequests, *rr.DeepCopy())
		}
	}
	for _, name := range admissionManagedConditions {
		if c := apimeta.FindStatusCondition(w.Status.Conditions, name); c != nil {
			st.Conditions = append(st.Conditions, *c.DeepCopy())
		}
	}
	st.AccumulatedPastExecutionTimeSeconds = w.Status.AccumulatedPastExecutionTimeSeconds
	if w.Status.SchedulingStats != nil {
		st.SchedulingStats = &kueue.SchedulingStats{Evictions: append([]kueue.WorkloadSchedulingStatsEviction(nil), w.Status.SchedulingStats.Evictions...)}
	}
	st.ClusterName = w.Status.ClusterName
	st.NominatedClusterNames = w.Status.NominatedClusterNames
	st.UnhealthyNodes = w.Status.UnhealthyNodes
	st.PreemptionGates = w.Status.PreemptionGates
	if w.Status.AdmissionChecks != nil {
		st.AdmissionChecks = make([]kueue.AdmissionCheckState, 0, len(w.Status.AdmissionChecks))
		for _, ac := range w.Status.AdmissionChecks {
			if ac.LastTransitionTime.IsZero() {
				ac.LastTransitionTime = metav1.NewTime(time.Now())
			}
			st.AdmissionChecks = append(st.AdmissionChecks, *ac.DeepCopy())
		}
	}
	if err := c.Status().Patch(ctx, p, client.Apply, client.FieldOwner(kueueAdmissionManager), client.ForceOwnership); err != nil { //nolint:staticcheck // SA1019: as Kueue applies
		return err
	}
	p.DeepCopyInto(wl)
	return nil
}

// findAdmissionCheck returns the state of the named check, nil if absent.
func findAdmissionCheck(checks []kueue.AdmissionCheckState, name kueue.AdmissionCheckReference) *kueue.AdmissionCheckState {
	for i := range checks {
		if checks[i].Name == name {
			return &checks[i]
		}
	}
	return nil
}

// setAdmissionCheckState sets the named check's state, message and
// transition time (when the state changes) in checks, adding it if absent.
func setAdmissionCheckState(checks *[]kueue.AdmissionCheckState, s kueue.AdmissionCheckState) {
	now := metav1.NewTime(time.Now())
	if cur := findAdmissionCheck(*checks, s.Name); cur != nil {
		if cur.State != s.State {
			cur.State, cur.LastTransitionTime = s.State, now
		}
		cur.Message = s.Message
		cur.PodSetUpdates = s.PodSetUpdates
		cur.RequeueAfterSeconds = s.RequeueAfterSeconds
		return
	}
	if s.LastTransitionTime.IsZero() {
		s.LastTransitionTime = now
	}
	*checks = append(*checks, s)
}
