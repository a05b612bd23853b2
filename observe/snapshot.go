package observe

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Labels Kueue puts on objects: MultiKueue labels every remote copy
// (Workload and job object) with LabelOrigin, and a remote job object also
// with LabelPrebuiltWorkload; LabelJobUID ties a Workload to its job.
// LabelOrigin is Kueue's API constant; the other two are spelled out here
// because Kueue declares them in pkg/controller/constants, outside its API,
// and the library imports only Kueue's apis/ (the Kueue under test runs as
// its binary). TestLabelsAreKueues checks them against Kueue's constants.
const (
	LabelOrigin           = kueue.MultiKueueOriginLabel
	LabelPrebuiltWorkload = "kueue.x-k8s.io/prebuilt-workload-name"
	LabelJobUID           = "kueue.x-k8s.io/job-uid"
	// AnnotationOriginUID is the manager object's UID that MultiKueue
	// writes on the copies of the kinds it copies without a
	// prebuilt-workload-name (a LeaderWorkerSet's one copy serves every
	// group's Workload) and on a StatefulSet's; kept in Event.Labels.
	AnnotationOriginUID = kueue.MultiKueueOriginUIDAnnotation
	// AnnotationComponentIndex marks a Workload as one of several Kueue
	// made for one job object (a LeaderWorkerSet's group index), which
	// MultiKueue places on one worker.
	AnnotationComponentIndex = "kueue.x-k8s.io/component-workload-index"
)

// FromMultiKueue reports whether labels mark an object as one MultiKueue
// created on a worker: it carries LabelOrigin. A worker's object of the same
// kind, namespace and name without it (its own Job, a Workload someone
// created there) is foreign: a name match alone never makes a copy. A
// prebuilt-workload-name label alone does not count either: it is also how a
// worker's own Job names a Workload prebuilt there.
func FromMultiKueue(labels map[string]string) bool {
	_, ok := labels[LabelOrigin]
	return ok
}

// snapshot is the little that is kept of an object's last state on one
// cluster: enough to tell which transitions a new version makes.
type snapshot struct {
	uid         types.UID
	flags       map[Type]bool
	clusterName string
	nominated   []string
	checks      map[string]string
	jobStatus   string
	reason      map[Type]string
	labels      map[string]string
	// generation and labelSum (a digest of all labels) tell a Modified
	// transition: a spec or label change that no other transition explains.
	generation int64
	labelSum   uint64
	queue      string
	usage      corev1.ResourceList
	// podJob: a pod that is a job object of its own (see KindPod), told
	// with a job's transitions besides a pod's Bound.
	podJob bool
}

func condTrue(conds []metav1.Condition, t string) (bool, string) {
	c := apimeta.FindStatusCondition(conds, t)
	if c == nil || c.Status != metav1.ConditionTrue {
		return false, ""
	}
	return true, c.Reason
}

func keptLabels(l map[string]string) map[string]string {
	return keptMeta(l, nil)
}

// keptMeta is keptLabels for a job object: its prebuilt Workload's name is
// kept under LabelPrebuiltWorkload whether Kueue wrote it as the label or
// as the annotation of the same key, and AnnotationOriginUID (PrebuiltWorkloadName; Kueue v0.19's
// constants.PrebuiltWorkloadAnnotation is the label's key).
func keptMeta(l, annotations map[string]string) map[string]string {
	var out map[string]string
	for _, k := range []string{LabelOrigin, LabelPrebuiltWorkload} {
		if v, ok := l[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	for _, k := range []string{LabelPrebuiltWorkload, AnnotationOriginUID} {
		if v := annotations[k]; v != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// PrebuiltWorkloadName is the name of the Workload prebuilt for a job
// object, as Kueue reads it (jobframework.PrebuiltWorkloadNameFor): the
// annotation kueue.x-k8s.io/prebuilt-workload-name, which Kueue v0.19
// writes (gate WorkloadIdentifierAnnotations, on by default there), else
// the label of the same key, which earlier releases write; "" for none.
func PrebuiltWorkloadName(obj metav1.Object) string {
	if v := obj.GetAnnotations()[LabelPrebuiltWorkload]; v != "" {
		return v
	}
	return obj.GetLabels()[LabelPrebuiltWorkload]
}

// labelDigest is a digest of every label: two label sets differ when their
// digests do (up to hash collisions, which only hide a Modified transition).
func labelDigest(l map[string]string) uint64 {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := fnv.New64a()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(l[k]))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func workloadSnapshot(wl *kueue.Workload) *snapshot {
	s := &snapshot{flags: map[Type]bool{}, reason: map[Type]string{}, checks: map[string]string{}, labels: keptLabels(wl.Labels),
		generation: wl.Generation, labelSum: labelDigest(wl.Labels)}
	s.uid = wl.UID
	s.flags[DeletionRequested] = !wl.DeletionTimestamp.IsZero()
	for t, cond := range map[Type]string{
		QuotaReserved: kueue.WorkloadQuotaReserved, Admitted: kueue.WorkloadAdmitted,
		Evicted: kueue.WorkloadEvicted, Finished: kueue.WorkloadFinished,
	} {
		s.flags[t], s.reason[t] = condTrue(wl.Status.Conditions, cond)
	}
	if adm := wl.Status.Admission; adm != nil {
		s.queue = string(adm.ClusterQueue)
		s.usage = corev1.ResourceList{}
		for _, psa := range adm.PodSetAssignments {
			for n, q := range psa.ResourceUsage {
				sum := s.usage[n]
				sum.Add(q)
				s.usage[n] = sum
			}
		}
	}
	s.clusterName = ptr.Deref(wl.Status.ClusterName, "")
	s.nominated = slices.Clone(wl.Status.NominatedClusterNames)
	for _, ac := range wl.Status.AdmissionChecks {
		s.checks[string(ac.Name)] = string(ac.State)
	}
	return s
}

func jobSnapshot(obj client.Object, st JobState) *snapshot {
	s := &snapshot{uid: obj.GetUID(), flags: map[Type]bool{}, reason: map[Type]string{}, labels: keptMeta(obj.GetLabels(), obj.GetAnnotations()),
		generation: obj.GetGeneration(), labelSum: labelDigest(obj.GetLabels())}
	s.flags[DeletionRequested] = !obj.GetDeletionTimestamp().IsZero()
	s.flags[JobSuspended] = st.Suspended
	s.flags[JobStarted] = st.Started
	if st.Succeeded {
		s.flags[JobSucceeded], s.reason[JobSucceeded] = true, st.Reason
	}
	if st.Failed {
		s.flags[JobFailed], s.reason[JobFailed] = true, st.Reason
	}
	s.jobStatus = st.Summary
	return s
}

func clusterSnapshot(c *kueue.MultiKueueCluster) *snapshot {
	s := &snapshot{flags: map[Type]bool{}, reason: map[Type]string{}}
	s.uid = c.UID
	cond := apimeta.FindStatusCondition(c.Status.Conditions, kueue.MultiKueueClusterActive)
	if cond != nil {
		s.flags[ClusterActive] = cond.Status == metav1.ConditionTrue
		s.reason[ClusterActive] = fmt.Sprintf("reason=%s message=%q", cond.Reason, cond.Message)
		s.jobStatus = string(cond.Status) + "/" + cond.Reason
	}
	return s
}

// jobTransitions are the job part of diff.
func jobTransitions(prev, cur *snapshot, add func(Type, string, []string)) {
	if cur.flags[JobSuspended] != prev.flags[JobSuspended] || prev.jobStatus == "" {
		if cur.flags[JobSuspended] {
			add(JobSuspended, "", nil)
		} else {
			add(JobUnsuspended, "", nil)
		}
	}
	for _, t := range []Type{JobStarted, JobSucceeded, JobFailed} {
		if cur.flags[t] && !prev.flags[t] {
			add(t, cur.reason[t], nil)
		}
	}
	if cur.jobStatus != prev.jobStatus {
		add(JobStatus, cur.jobStatus, nil)
	}
}

// diff appends to out the transitions from prev (nil: the object is new) to
// cur. base is a template carrying time, cluster, kind and name.
func diff(base Event, prev, cur *snapshot) []Event {
	var out []Event
	created := false
	add := func(t Type, detail string, values []string) {
		e := base
		e.Type, e.Detail, e.Values, e.Labels = t, detail, values, cur.labels
		out = append(out, e)
	}
	if prev == nil {
		detail := ""
		if len(cur.labels) > 0 {
			var kv []string
			for k, v := range cur.labels {
				kv = append(kv, k+"="+v)
			}
			slices.Sort(kv)
			detail = strings.Join(kv, ",")
		}
		add(Created, detail, nil)
		prev = &snapshot{flags: map[Type]bool{}, checks: map[string]string{}}
		created = true
	}
	if cur.flags[DeletionRequested] && !prev.flags[DeletionRequested] {
		add(DeletionRequested, "", nil)
	}
	switch base.Kind {
	case KindWorkload:
		pairs := []struct{ on, off Type }{{QuotaReserved, QuotaReleased}, {Admitted, AdmissionRemoved}, {Evicted, ""}, {Finished, ""}}
		for _, p := range pairs {
			switch {
			case cur.flags[p.on] && !prev.flags[p.on]:
				add(p.on, cur.reason[p.on], nil)
				if p.on == QuotaReserved {
					out[len(out)-1].Queue, out[len(out)-1].Usage = cur.queue, cur.usage
				}
			case !cur.flags[p.on] && prev.flags[p.on] && p.off != "":
				add(p.off, "", nil)
			}
		}
		if !slices.Equal(prev.nominated, cur.nominated) {
			add(Nominated, "["+strings.Join(cur.nominated, ",")+"]", slices.Clone(cur.nominated))
		}
		if prev.clusterName != cur.clusterName {
			add(ClusterNameSet, fmt.Sprintf("%q", cur.clusterName), []string{cur.clusterName})
		}
		names := make([]string, 0, len(cur.checks))
		for n := range cur.checks {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if prev.checks[n] != cur.checks[n] {
				add(CheckState, n+"="+cur.checks[n], []string{n, cur.checks[n]})
			}
		}
	case KindClusterQueue:
		if cur.jobStatus != prev.jobStatus {
			add(QuotaSet, cur.jobStatus, nil)
			out[len(out)-1].Usage = cur.usage
		}
	case KindPod:
		podTransitions(prev, cur, add)
		if cur.podJob {
			jobTransitions(prev, cur, add)
		}
	case KindMultiKueueCluster:
		if cur.jobStatus != prev.jobStatus {
			if cur.flags[ClusterActive] {
				add(ClusterActive, cur.reason[ClusterActive], nil)
			} else {
				add(ClusterInactive, cur.reason[ClusterActive], nil)
			}
		}
	default: // a job kind
		jobTransitions(prev, cur, add)
	}
	if created || base.Kind == KindMultiKueueCluster || base.Kind == KindPod {
		return out
	}
	// A spec change shows as a new generation; one that flips suspend is
	// already told by Suspended/Unsuspended (the worker's own Kueue does
	// that to its Jobs). Labels are compared whole.
	var what []string
	if cur.generation != prev.generation && cur.flags[JobSuspended] == prev.flags[JobSuspended] {
		what = append(what, fmt.Sprintf("spec (generation %d)", cur.generation))
	}
	if cur.labelSum != prev.labelSum {
		what = append(what, "labels")
	}
	if len(what) > 0 {
		add(Modified, strings.Join(what, ", "), what)
	}
	return out
}
