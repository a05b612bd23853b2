package observe

import (
	"fmt"

	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kind of object an event is about.
type Kind string

const (
	KindWorkload          Kind = "Workload"
	KindMultiKueueCluster Kind = "MultiKueueCluster"
)

// Type of a recorded transition.
type Type string

const (
	Created Type = "Created"
	Deleted Type = "Deleted"
	// DeletionRequested: deletionTimestamp set, the object still there
	// (finalizers pending).
	DeletionRequested Type = "DeletionRequested"
	QuotaReserved     Type = "QuotaReserved"
	QuotaReleased     Type = "QuotaReleased"
	Admitted          Type = "Admitted"
	AdmissionRemoved  Type = "AdmissionRemoved"
	Evicted           Type = "Evicted"
	Finished          Type = "Finished"
	Nominated         Type = "NominatedClusterNames"
	ClusterNameSet    Type = "ClusterName"
	CheckState        Type = "AdmissionCheck"
	// Job transitions.
	JobSuspended   Type = "Suspended"
	JobUnsuspended Type = "Unsuspended"
	JobStarted     Type = "Started"
	JobSucceeded   Type = "Succeeded"
	JobFailed      Type = "Failed"
	JobStatus      Type = "Status"
	// Modified: a Workload's or job object's spec (a new
	// metadata.generation, unless the change flipped suspend, which
	// Suspended/Unsuspended tell) or labels changed. Detail says which.
	Modified Type = "Modified"
	// MultiKueueCluster transitions.
	ClusterActive   Type = "Active"
	ClusterInactive Type = "Inactive"
)

// Event is one recorded transition of one object on one cluster.
type Event struct {
	Time      time.Time
	Cluster   string
	Kind      Kind
	Namespace string
	Name      string
	// UID of the object: a name can be reused, remote copies have their own.
	UID  types.UID
	Type Type
	// Detail is a short human-readable value: the new clusterName, the
	// nominated list, a check's state, a condition reason.
	Detail string
	// Values carries machine-readable detail (nominated clusters, for example).
	Values []string
	// Labels of interest at the time (origin, prebuilt-workload-name; the
	// latter also when Kueue wrote it as an annotation, see
	// PrebuiltWorkloadName).
	Labels map[string]string
	// Queue and Usage, on QuotaReserved: the ClusterQueue and the resources
	// the admission charged (status.admission). On QuotaSet (a
	// ClusterQueue), Usage is the queue's limit (QuotaLimit).
	Queue string
	Usage corev1.ResourceList
	// Actor is who made the change, once Observer.Attribute has matched the
	// event to the API server's audit log; zero until then.
	Actor Actor
}

// ClusterName is the status.clusterName a ClusterNameSet event sets: the
// worker the manager placed the Workload on, "" when it was reset (and for
// any other type of event).
func (e Event) ClusterName() string {
	if e.Type != ClusterNameSet || len(e.Values) == 0 {
		return ""
	}
	return e.Values[0]
}

func (e Event) String() string {
	s := fmt.Sprintf("%s %-10s %s %s/%s %s", e.Time.Format("15:04:05.000"), e.Cluster, e.Kind, e.Namespace, e.Name, e.Type)
	if e.Detail != "" {
		s += " " + e.Detail
	}
	return s
}

// Timeline renders events grouped per cluster, in cluster order, one line per
// event with times relative to the first event: the story an assertion tells.
func Timeline(events []Event, clusters []string) string {
	if len(events) == 0 {
		return "  (no events recorded)\n"
	}
	t0 := events[0].Time
	for _, e := range events {
		if e.Time.Before(t0) {
			t0 = e.Time
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "  timeline from %s:\n", t0.Format("15:04:05.000"))
	for _, c := range clusters {
		var lines []string
		for _, e := range events {
			if e.Cluster != c {
				continue
			}
			line := fmt.Sprintf("      +%-8s %s %s/%s %s", e.Time.Sub(t0).Round(time.Millisecond), e.Kind, e.Namespace, e.Name, e.Type)
			if e.Detail != "" {
				line += " " + e.Detail
			}
			if !e.Actor.IsZero() {
				line += "  [by " + e.Actor.Describe(c) + "]"
			}
			lines = append(lines, line)
		}
		if len(lines) == 0 {
			fmt.Fprintf(&sb, "    cluster %q: nothing\n", c)
			continue
		}
		fmt.Fprintf(&sb, "    cluster %q:\n%s\n", c, strings.Join(lines, "\n"))
	}
	return sb.String()
}
