package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/topology"
)

// Each cluster's kube-apiserver writes an audit log (JSON lines, Metadata
// level: who, what, when; never a request or response body) of the writes
// attribution needs, and the Observer reads it through Provider.AuditSource.
// The log file is read on demand, when a failure's timeline is rendered:
// nothing runs in the test process while the tests do.

// Client identities of a local cluster, one client certificate each, so that
// the audit log tells them apart.
const (
	// kueueUser is the in-process Kueue's user (system:masters, as Kueue's
	// own ClusterRole is broad).
	kueueUser = "kueue"
	// agentUser is the library's own clients' user in a cluster (the Ray
	// dashboard stand-in, the HA replicas' probe).
	agentUser = "mktk-agent"
	// jobsetUser is the in-process JobSet controller's user (workers with
	// the JobSet integration).
	jobsetUser = "jobset-controller"
	// kuberayUser is the in-process KubeRay operator's user (workers with a
	// Ray integration).
	kuberayUser = "kuberay-operator"
	// trainingOperatorUser is the Kubeflow training-operator's user
	// (workers with a Kubeflow training job integration).
	trainingOperatorUser = "training-operator"
	// mpiOperatorUser is the MPI operator's user (workers with the MPIJob
	// integration).
	mpiOperatorUser = "mpi-operator"
	// appWrapperUser is the AppWrapper controller's user (workers with the
	// AppWrapper integration).
	appWrapperUser = "appwrapper-controller"
	// lwsUser is the LeaderWorkerSet controller's user (every cluster with
	// the LeaderWorkerSet integration).
	lwsUser = "lws-controller"
	// trainerUser is the Kubeflow Trainer's user (workers with the
	// TrainJob integration).
	trainerUser = "trainer-controller"
)

// Roles of the real controllers the local topology runs, as timelines name
// them ("kube-controller-manager (system:kube-controller-manager)").
const (
	roleControllerManager topology.WriterRole = "kube-controller-manager"
	roleJobSet            topology.WriterRole = "the JobSet controller"
	roleKubeRay           topology.WriterRole = "the KubeRay operator"
	roleTrainingOperator  topology.WriterRole = "the Kubeflow training-operator"
	roleMPIOperator       topology.WriterRole = "the MPI operator"
	roleAppWrapper        topology.WriterRole = "the AppWrapper controller"
	roleLWS               topology.WriterRole = "the LeaderWorkerSet controller"
	roleTrainer           topology.WriterRole = "the Kubeflow Trainer"
	roleScheduler         topology.WriterRole = "kube-scheduler"
	roleKWOK              topology.WriterRole = "the KWOK controller (the kubelet's part)"
	roleAutoscaler        topology.WriterRole = "the simulated autoscaler"
)

// roleOf maps the local identities to their roles.
func roleOf(user string) topology.WriterRole {
	switch user {
	case adminUser:
		return topology.WriterTest
	case kueueUser:
		return topology.WriterKueue
	case agentUser:
		return topology.WriterAgent
	case kcmUser:
		return roleControllerManager
	case jobsetUser:
		return roleJobSet
	case kuberayUser:
		return roleKubeRay
	case trainingOperatorUser:
		return roleTrainingOperator
	case mpiOperatorUser:
		return roleMPIOperator
	case appWrapperUser:
		return roleAppWrapper
	case lwsUser:
		return roleLWS
	case trainerUser:
		return roleTrainer
	case schedulerUser:
		return roleScheduler
	case kwokUser:
		return roleKWOK
	case autoscalerUser:
		return roleAutoscaler
	}
	return ""
}

// auditPolicy is the audit policy every API server of spec's topology runs:
// the writes (create, update, patch, delete, deletecollection), at the
// Metadata level, to the resources the Observer records
// (auditedResources, subresources included), to Secrets in Kueue's
// namespace and to ClusterProfiles, to pods (bindings and status included)
// and to Nodes; nothing else, and only the
// ResponseComplete stage.
func auditPolicy(spec topology.Spec) ([]byte, error) {
	watched := auditedResources(spec.Kueue.Integrations)
	writes := []string{"create", "update", "patch", "delete", "deletecollection"}
	byGroup := map[string][]string{}
	add := func(gr schema.GroupResource) {
		byGroup[gr.Group] = append(byGroup[gr.Group], gr.Resource, gr.Resource+"/*")
	}
	for _, gr := range watched {
		add(gr)
	}
	add(schema.GroupResource{Group: "multicluster.x-k8s.io", Resource: "clusterprofiles"})
	// KWOK Nodes (pods are among what the Observer records).
	add(schema.GroupResource{Resource: "nodes"})
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var watchedRes []auditv1.GroupResources
	for _, g := range groups {
		watchedRes = append(watchedRes, auditv1.GroupResources{Group: g, Resources: byGroup[g]})
	}
	p := auditv1.Policy{
		OmitStages: []auditv1.Stage{auditv1.StageRequestReceived, auditv1.StageResponseStarted},
		Rules: []auditv1.PolicyRule{
			{Level: auditv1.LevelMetadata, Verbs: writes, Resources: watchedRes},
			{Level: auditv1.LevelMetadata, Verbs: writes, Namespaces: []string{spec.Kueue.Namespace},
				Resources: []auditv1.GroupResources{{Group: "", Resources: []string{"secrets"}}}},
			{Level: auditv1.LevelNone},
		},
	}
	p.APIVersion, p.Kind = auditv1.SchemeGroupVersion.String(), "Policy"
	return yaml.Marshal(&p)
}

// auditLog is one cluster's audit log file, read incrementally. It
// implements topology.AuditSource.
type auditLog struct {
	path string

	mu      sync.Mutex
	offset  int64
	partial []byte // a line not yet terminated
	writes  []topology.AuditWrite
	refused []topology.AuditWrite
}

var (
	_ topology.AuditSource   = (*auditLog)(nil)
	_ topology.RefusalSource = (*auditLog)(nil)
)

// Writes implements topology.AuditSource: it reads what the API server
// appended since the last call.
func (a *auditLog) Writes(_ context.Context, since time.Time) ([]topology.AuditWrite, error) {
	return a.read(func() []topology.AuditWrite { return a.writes }, since)
}

// Refused implements topology.RefusalSource: the writes the API server
// answered 403 or 422.
func (a *auditLog) Refused(_ context.Context, since time.Time) ([]topology.AuditWrite, error) {
	return a.read(func() []topology.AuditWrite { return a.refused }, since)
}

// read reads what the API server appended, then returns the writes of
// list received at or after since.
func (a *auditLog) read(list func() []topology.AuditWrite, since time.Time) ([]topology.AuditWrite, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.readNew(); err != nil {
		return nil, err
	}
	return receivedSince(list(), since), nil
}

// receivedSince is the writes received at or after since.
func receivedSince(writes []topology.AuditWrite, since time.Time) []topology.AuditWrite {
	var out []topology.AuditWrite
	for _, w := range writes {
		if !w.Received.Before(since) {
			out = append(out, w)
		}
	}
	return out
}

func (a *auditLog) readNew() error {
	f, err := os.Open(a.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // the API server has not written it yet
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < a.offset { // rotated (past --audit-log-maxsize): start over
		a.offset, a.partial = 0, nil
	}
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	a.offset += int64(len(data))
	buf := append(a.partial, data...)
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		a.partial = buf
		return nil
	}
	a.partial = bytes.Clone(buf[end+1:])
	for line := range bytes.SplitSeq(buf[:end], []byte{'\n'}) {
		switch w, ok := parseAuditLine(line); {
		case !ok:
		case w.RefusedBy != "":
			a.refused = append(a.refused, w)
		default:
			a.writes = append(a.writes, w)
		}
	}
	return nil
}

// parseAuditLine turns one audit event into a write; false for anything but
// a completed request on an object that succeeded or was refused (403, 422;
// RefusedBy set).
func parseAuditLine(line []byte) (topology.AuditWrite, bool) {
	var ev auditv1.Event
	if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &ev) != nil {
		return topology.AuditWrite{}, false
	}
	ref := ev.ObjectRef
	if ev.Stage != auditv1.StageResponseComplete || ref == nil || ev.ResponseStatus == nil {
		return topology.AuditWrite{}, false
	}
	code := ev.ResponseStatus.Code
	refused := code == http.StatusForbidden || code == http.StatusUnprocessableEntity
	if !refused && (code < 200 || code > 299) {
		return topology.AuditWrite{}, false
	}
	w := topology.AuditWrite{
		Received: ev.RequestReceivedTimestamp.Time, Completed: ev.StageTimestamp.Time,
		Verb: ev.Verb, Resource: schema.GroupResource{Group: ref.APIGroup, Resource: ref.Resource}, Subresource: ref.Subresource,
		Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID, Code: code,
		User: ev.User.Username, UserAgent: ev.UserAgent, Role: roleOf(ev.User.Username),
	}
	if refused {
		w.Message = ev.ResponseStatus.Message
		w.RefusedBy = refuser(ev.Annotations, w.Message, code)
	}
	return w, true
}

// refuser names what refused a write, from the audit annotations and the
// API server's message.
func refuser(annotations map[string]string, message string, code int32) string {
	if annotations["authorization.k8s.io/decision"] == "forbid" {
		return "RBAC"
	}
	// "ValidatingAdmissionPolicy 'name' with binding 'b' denied request: ..."
	if _, rest, ok := strings.Cut(message, "ValidatingAdmissionPolicy '"); ok {
		if name, _, ok := strings.Cut(rest, "'"); ok {
			return "ValidatingAdmissionPolicy " + name
		}
	}
	// `admission webhook "name" denied the request: ...`
	if _, rest, ok := strings.Cut(message, `admission webhook "`); ok {
		if name, _, ok := strings.Cut(rest, `"`); ok {
			return "admission webhook " + name
		}
	}
	return fmt.Sprintf("the API server (%d)", code)
}

// AuditSource implements topology.AuditProvider: the audit log of the named
// cluster, nil when audit is off (Options.DisableAudit) or the cluster is
// unknown.
func (p *Provider) AuditSource(cluster string) topology.AuditSource {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, lc := range p.clusters {
		if lc.name == cluster && lc.cp.audit != nil {
			return lc.cp.audit
		}
	}
	return nil
}

// What the local provider offers beyond topology.Provider (topology/capabilities.go).
var (
	_ topology.AuditProvider     = (*Provider)(nil)
	_ topology.ClusterDirs       = (*Provider)(nil)
	_ topology.ReplicaVisibility = (*Provider)(nil)
	_ topology.ReplicaKiller     = (*Provider)(nil)
)

// enableAudit writes the policy into the cluster's directory; the API server
// then starts with it, logging to audit.log next to it.
func (cp *controlPlane) enableAudit(policy []byte) error {
	if err := os.WriteFile(cp.file(auditPolicyFile), policy, 0o600); err != nil {
		return fmt.Errorf("cluster %q: audit policy: %w", cp.cluster, err)
	}
	cp.audit = &auditLog{path: cp.file(auditLogFile)}
	return nil
}

// auditedResources is what the Observer records, as API resources: Kueue's
// Workloads, MultiKueueClusters and ClusterQueues, pods, and the job kind of
// every enabled integration (batch/job always). An integration names its
// kind as group/kind ("jobset.x-k8s.io/jobset"), whose resource is the
// lower-case plural; the built-in ones have no group in their name.
func auditedResources(integrations []string) []schema.GroupResource {
	out := []schema.GroupResource{
		{Group: kueue.SchemeGroupVersion.Group, Resource: "workloads"},
		{Group: kueue.SchemeGroupVersion.Group, Resource: "multikueueclusters"},
		{Group: kueue.SchemeGroupVersion.Group, Resource: "clusterqueues"},
		{Resource: "pods"},
	}
	builtin := map[string]schema.GroupResource{
		"pod":         {Resource: "pods"},
		"deployment":  {Group: "apps", Resource: "deployments"},
		"statefulset": {Group: "apps", Resource: "statefulsets"},
	}
	for _, in := range append([]string{topology.IntegrationBatchJob}, integrations...) {
		gr, ok := builtin[in]
		if group, kind, found := strings.Cut(in, "/"); found {
			gr, ok = schema.GroupResource{Group: group, Resource: strings.ToLower(kind) + "s"}, true
		}
		if ok && !slices.Contains(out, gr) {
			out = append(out, gr)
		}
	}
	return out
}
