package observe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/redact"
	"github.com/multikueue-testkit/testkit/topology"
)

// Attribution: who made each recorded change, read from the API servers'
// audit logs. A provider that can read its clusters' audit logs implements
// topology.AuditProvider (the local provider does); Observer.Attribute then matches
// every event to the write that caused it. Without audit sources events stay
// unattributed and timelines read as before.

// Actor is who made a recorded change, as the API server's audit log names
// the request that made it.
type Actor struct {
	// User is the authenticated user name (never a credential).
	User string
	// UserAgent is the client's User-Agent header.
	UserAgent string
	// Role is the part of the setup User stands for; empty when unknown.
	Role topology.WriterRole
	// Verb is the request: create, update, patch, delete, with the
	// subresource when there is one ("patch status").
	Verb string
	// Received and Completed are the write's requestReceivedTimestamp and
	// stageTimestamp: when the API server took the request and when it
	// answered, by the server's clock. They order writes across clusters
	// better than the Observer's receive times, which add each watch's
	// delivery delay.
	Received, Completed time.Time
}

// IsZero reports whether no actor is known.
func (a Actor) IsZero() bool { return a.User == "" }

// Describe names the actor for a timeline line of cluster.
func (a Actor) Describe(cluster string) string {
	user := redact.String(a.User)
	switch a.Role {
	case topology.WriterTest:
		return "the test (" + user + ")"
	case topology.WriterKueue:
		return cluster + "'s Kueue (" + user + ")"
	case topology.WriterMultiKueue:
		return "MultiKueue (" + user + ")"
	case topology.WriterAgent:
		return "the local agent (" + user + ")"
	case "":
		return user
	}
	return string(a.Role) + " (" + user + ")"
}

// Identity gives a Role to a user on one cluster, for users the audit source
// does not know: the identity MultiKueue's credentials authenticate as on a
// worker, for instance.
type Identity struct {
	Cluster string
	User    string
	Role    topology.WriterRole
}

// auditSources returns the audit source of every cluster of topo that has
// one.
func auditSources(topo *topology.Topology) map[string]topology.AuditSource {
	ap, ok := topo.Provider().(topology.AuditProvider)
	if !ok {
		return nil
	}
	out := map[string]topology.AuditSource{}
	for _, c := range topo.Clusters() {
		if s := ap.AuditSource(c.Name); s != nil {
			out[c.Name] = s
		}
	}
	return out
}

// Refused returns the writes cluster's API server refused since (see
// RefusalSource); readable is false when the cluster has no audit source or
// its source does not keep refusals, so that "none" and "not seen" differ.
func (o *Observer) Refused(ctx context.Context, cluster string, since time.Time) (writes []topology.AuditWrite, readable bool, err error) {
	rs, ok := o.audit[cluster].(topology.RefusalSource)
	if !ok {
		return nil, false, nil
	}
	writes, err = rs.Refused(ctx, since)
	return writes, err == nil, err
}

// HasAudit reports whether any observed cluster has an audit source.
func (o *Observer) HasAudit() bool { return len(o.audit) > 0 }

// AuditedResources returns the resources whose writes Attribute needs for a
// topology with these Kueue integrations: Workloads, the job kinds the
// Observer watches (JobKindsFor), their pods, MultiKueueClusters and
// ClusterQueues.
// Providers audit these (topology/local tests that its policy does).
func AuditedResources(integrations []string) ([]schema.GroupResource, error) {
	kinds := append([]Kind{KindWorkload, KindMultiKueueCluster, KindClusterQueue, KindPod}, JobKindsFor(integrations)...)
	out := make([]schema.GroupResource, 0, len(kinds))
	res, err := kindResources()
	if err != nil {
		return nil, err
	}
	for _, k := range kinds {
		if !slices.Contains(out, res[k]) { // KindPod is a job kind too with the pod integration
			out = append(out, res[k])
		}
	}
	return out, nil
}

// kindResources maps every kind the Observer can record to its API
// resource, through the topology's scheme.
// ResourceOf is the API resource of kind (what audit records name), for the
// kinds the Observer records.
func ResourceOf(kind Kind) (schema.GroupResource, error) {
	res, err := kindResources()
	if err != nil {
		return schema.GroupResource{}, err
	}
	gr, ok := res[kind]
	if !ok {
		return schema.GroupResource{}, fmt.Errorf("observe: kind %s is not recorded", kind)
	}
	return gr, nil
}

func kindResources() (map[Kind]schema.GroupResource, error) {
	scheme, err := topology.NewScheme()
	if err != nil {
		return nil, err
	}
	objs := map[Kind]client.Object{
		KindWorkload: &kueue.Workload{}, KindMultiKueueCluster: &kueue.MultiKueueCluster{}, KindClusterQueue: &kueue.ClusterQueue{},
		KindPod: &corev1.Pod{},
	}
	for _, jk := range jobKindTable() {
		objs[jk.kind] = jk.newObj()
	}
	out := make(map[Kind]schema.GroupResource, len(objs))
	for k, obj := range objs {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil || len(gvks) == 0 {
			return nil, fmt.Errorf("observe: kind %s is not in the topology scheme: %v", k, err)
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvks[0])
		out[k] = plural.GroupResource()
	}
	return out, nil
}

// Attribute returns a copy of events with Actor set on every event of a
// cluster that has an audit source: the last write to the same object
// (cluster, resource, namespace, name; UID when the write carries one) that
// the API server received before the Observer saw the change; for a
// creation, the create request; for a deletion request, the delete. The
// other events of a creation's informer notification (the state the object
// was created in, or had when the Observer started) take the last write
// completed before it, else the create request. Roles come
// from the audit source, else from ids. Events of clusters without a source,
// or whose write is not (yet) in the log, keep a zero Actor.
//
// Matching is by time, as audit events at the Metadata level carry no
// resulting resourceVersion: two writes to one object by different actors
// within the few milliseconds it takes a watch event to arrive can be
// confused. An object created with generateName (a pod) is matched to the
// last nameless create of its resource and namespace: two such creates by
// different actors at once can be confused too.
func (o *Observer) Attribute(ctx context.Context, events []Event, ids ...Identity) ([]Event, error) {
	out := slices.Clone(events)
	if len(o.audit) == 0 || len(events) == 0 {
		return out, nil
	}
	res, err := kindResources()
	if err != nil {
		return out, err
	}
	type writeKey struct {
		cluster   string
		gr        schema.GroupResource
		namespace string
		name      string
	}
	byObj := map[writeKey][]topology.AuditWrite{}
	var errs []error
	for cluster, src := range o.audit {
		writes, err := src.Writes(ctx, time.Time{})
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: audit log: %w", cluster, err))
			continue
		}
		for _, w := range writes {
			k := writeKey{cluster, w.Resource, w.Namespace, w.Name}
			byObj[k] = append(byObj[k], w)
		}
	}
	roles := map[[2]string]topology.WriterRole{}
	for _, id := range ids {
		roles[[2]string{id.Cluster, id.User}] = id.Role
	}
	// Events of one informer notification share their time.
	type groupKey struct {
		writeKey
		at time.Time
	}
	creates := map[groupKey]bool{}
	for _, e := range events {
		if e.Type == Created {
			creates[groupKey{writeKey{e.Cluster, res[e.Kind], e.Namespace, e.Name}, e.Time}] = true
		}
	}
	for i, e := range out {
		if o.audit[e.Cluster] == nil {
			continue
		}
		k := writeKey{e.Cluster, res[e.Kind], e.Namespace, e.Name}
		inCreation := creates[groupKey{k, e.Time}]
		w, ok := causeOf(byObj[k], e, inCreation)
		if !ok && inCreation {
			// A create with generateName (a Job's pods) is logged before
			// the name exists: its objectRef has none. The last such
			// create of the resource in the namespace shortly before.
			unnamed := writeKey{e.Cluster, res[e.Kind], e.Namespace, ""}
			w, ok = causeOf(byObj[unnamed], e, true)
			ok = ok && e.Time.Sub(w.Received) < generatedNameWindow
		}
		if e.Type != Created && inCreation {
			// A pod seen first already bound: its binding, not its create.
			if later, found := lastCompleted(byObj[k], e); found && (!ok || later.Received.After(w.Received)) {
				w, ok = later, true
			}
		}
		if !ok {
			continue
		}
		role := w.Role
		if role == "" {
			role = roles[[2]string{e.Cluster, w.User}]
		}
		verb := w.Verb
		if w.Subresource != "" {
			verb += " " + w.Subresource
		}
		out[i].Actor = Actor{User: w.User, UserAgent: w.UserAgent, Role: role, Verb: verb, Received: w.Received, Completed: w.Completed}
	}
	return out, errors.Join(errs...)
}

// generatedNameWindow bounds how long before the Observer saw an object
// with a generated name its create request may have been received to count
// as its cause.
const generatedNameWindow = 5 * time.Second

// lastCompleted is the last of one object's writes completed before e.
func lastCompleted(writes []topology.AuditWrite, e Event) (topology.AuditWrite, bool) {
	var best *topology.AuditWrite
	for i := range writes {
		w := &writes[i]
		if w.Completed.After(e.Time) || (w.UID != "" && e.UID != "" && w.UID != e.UID) {
			continue
		}
		if best == nil || !w.Completed.Before(best.Completed) {
			best = w
		}
	}
	if best == nil {
		return topology.AuditWrite{}, false
	}
	return *best, true
}

// causeOf picks, among one object's writes, the one that caused e: the last
// fitting write received before the Observer saw the change. create
// restricts the choice to create requests of the object itself (a pod's
// binding is a create of its subresource, made by kube-scheduler, and may
// reach the log before the Observer sees the pod), a DeletionRequested
// event to delete requests.
func causeOf(writes []topology.AuditWrite, e Event, create bool) (topology.AuditWrite, bool) {
	var best *topology.AuditWrite
	for i := range writes {
		w := &writes[i]
		switch {
		case w.Received.After(e.Time),
			create && (w.Verb != "create" || w.Subresource != ""),
			e.Type == DeletionRequested && w.Verb != "delete",
			w.UID != "" && e.UID != "" && w.UID != e.UID:
			continue
		}
		if best == nil || !w.Received.Before(best.Received) {
			best = w
		}
	}
	if best == nil {
		return topology.AuditWrite{}, false
	}
	return *best, true
}
