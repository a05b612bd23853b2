package topology

import (
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxWorkers is the MultiKueueConfig limit on clusters.
const MaxWorkers = 20

// Options describe a topology. Only Workers (or WorkerNames) is required;
// everything else has a default that Resolve applies.
type Options struct {
	// Workers is the number of worker clusters, 1 to 20 (required unless
	// WorkerNames is set, in which case it is ignored).
	Workers int
	// WorkerNames names the workers explicitly; default worker-1 ... worker-N.
	WorkerNames []string
	// ManagerName names the manager cluster; default "manager".
	ManagerName string

	// WorkerQuota is every worker's ClusterQueue quota unless WorkerQuotas
	// names that worker. Default: 4 CPU, 8Gi memory.
	WorkerQuota Quota
	// WorkerQuotas overrides the quota of single workers, by name.
	WorkerQuotas map[string]Quota
	// ManagerQuota is the manager ClusterQueue quota; default the sum of the
	// worker quotas.
	ManagerQuota *Quota

	// Kueue configures Kueue on every cluster.
	Kueue KueueOptions
	// Queues names the queue objects mirrored on every cluster.
	Queues QueueOptions
	// TAS, when set, makes every cluster's ResourceFlavor topology-aware
	// (Kueue's Topology-Aware Scheduling with MultiKueue).
	TAS *TAS

	// Connector attaches workers to the manager. When nil, New asks the
	// provider (ConnectorDefaulter); every provider of this module answers
	// connect.Default: the connector $MKTK_CONNECTOR names, else the
	// kubeconfig Secret, without the guard unless $MKTK_GUARD.
	Connector Connector

	// Timeouts raise (or lower) the bounds the assertions and scenarios
	// wait with on this topology, each field over the provider's
	// suggestion (Topology.Timeouts); zero fields keep it.
	Timeouts Timeouts

	// ReadyTimeout bounds the wait for the MultiKueue objects to become
	// Active. Default 2 minutes.
	ReadyTimeout time.Duration
	// Progress receives one line per setup step; nil discards.
	Progress io.Writer
}

// Quota is a ClusterQueue's nominal quota. Values are Kubernetes quantities.
type Quota struct {
	CPU    string
	Memory string
}

// KueueOptions is the Kueue configuration shared by all clusters.
type KueueOptions struct {
	// Namespace Kueue runs in; default "kueue-system".
	Namespace string
	// Integrations are Kueue framework names; default ["batch/job"].
	// Known: batch/job, jobset.x-k8s.io/jobset, ray.io/rayjob, ray.io/raycluster.
	Integrations []string
	// Dispatcher is multiKueue.dispatcherName; default AllAtOnce.
	Dispatcher string
	// GCInterval is multiKueue.gcInterval; nil means Kueue's default (1m),
	// a pointer to 0 disables garbage collection.
	GCInterval *time.Duration
	// WorkerLostTimeout is multiKueue.workerLostTimeout; nil means 15m.
	WorkerLostTimeout *time.Duration
	// Origin is multiKueue.origin; default "multikueue".
	Origin string
	// FeatureGates are set on every cluster's Kueue (its Configuration's
	// featureGates), over the ones the connector needs.
	FeatureGates map[string]bool
}

// QueueOptions names the objects that MultiKueue needs mirrored.
type QueueOptions struct {
	// Namespaces hold a LocalQueue each; default ["default"].
	Namespaces     []string
	ResourceFlavor string // default "default-flavor"
	ClusterQueue   string // default "cluster-queue"
	LocalQueue     string // default "user-queue"
	// MultiKueueConfig and AdmissionCheck names on the manager; default "multikueue".
	MultiKueueConfig string
	AdmissionCheck   string
}

// Dispatcher names (multiKueue.dispatcherName).
const (
	DispatcherAllAtOnce   = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
	DispatcherIncremental = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
)

// Integration names: Kueue's framework names of the job kinds MultiKueue
// dispatches (TestIntegrationNamesAreKueues checks them against Kueue's).
// The local topology runs the controllers of batch/Job, JobSet, RayJob,
// RayCluster, RayService, the Kubeflow training jobs (PyTorchJob, TFJob,
// XGBoostJob, PaddleJob, JAXJob), the MPIJob, the TrainJob (with JobSet), the
// AppWrapper, the pod, Deployment and StatefulSet integrations and the
// LeaderWorkerSet: every kind MultiKueue dispatches.
const (
	IntegrationBatchJob        = "batch/job"
	IntegrationJobSet          = "jobset.x-k8s.io/jobset"
	IntegrationRayJob          = "ray.io/rayjob"
	IntegrationRayCluster      = "ray.io/raycluster"
	IntegrationRayService      = "ray.io/rayservice"
	IntegrationMPIJob          = "kubeflow.org/mpijob"
	IntegrationPyTorchJob      = "kubeflow.org/pytorchjob"
	IntegrationTFJob           = "kubeflow.org/tfjob"
	IntegrationXGBoostJob      = "kubeflow.org/xgboostjob"
	IntegrationPaddleJob       = "kubeflow.org/paddlejob"
	IntegrationJAXJob          = "kubeflow.org/jaxjob"
	IntegrationTrainJob        = "trainer.kubeflow.org/trainjob"
	IntegrationAppWrapper      = "workload.codeflare.dev/appwrapper"
	IntegrationPod             = "pod"
	IntegrationDeployment      = "deployment"
	IntegrationStatefulSet     = "statefulset"
	IntegrationLeaderWorkerSet = "leaderworkerset.x-k8s.io/leaderworkerset"
)

// Spec is Options with every default applied and every quantity parsed. A
// Topology carries its Spec so that assertions can read, for example, the GC
// interval.
type Spec struct {
	Options
	// Quotas maps each cluster name (manager included) to its parsed quota.
	Quotas map[string]corev1.ResourceList
}

// GCInterval is the effective multiKueue.gcInterval: Options.Kueue.GCInterval,
// which Resolve fills with Kueue's default when it was not given and which
// the topology sets to what the manager's Kueue runs once it was read. 0
// means GC is off.
func (s Spec) GCInterval() time.Duration {
	if s.Kueue.GCInterval == nil {
		return DefaultGCInterval
	}
	return *s.Kueue.GCInterval
}

// WorkerLostTimeout is the effective multiKueue.workerLostTimeout, held in
// Options.Kueue.WorkerLostTimeout like GCInterval.
func (s Spec) WorkerLostTimeout() time.Duration {
	if s.Kueue.WorkerLostTimeout == nil {
		return DefaultWorkerLostTimeout
	}
	return *s.Kueue.WorkerLostTimeout
}

// TAS is Topology-Aware Scheduling on every cluster, as Kueue's own
// MultiKueue TAS tests set it up: a Topology of Levels on every cluster and
// the ResourceFlavor naming it and selecting Nodes by NodeLabels. The
// manager needs no Nodes (its topology request is delayed until a worker
// admitted the Workload); the workers' Nodes must carry NodeLabels and a
// label of every level (the local topology's Nodes get NodeLabels, and
// have kubernetes.io/hostname).
type TAS struct {
	// Topology names the Topology; default "default".
	Topology string
	// Levels are node label keys, the broadest first; default
	// [kubernetes.io/hostname].
	Levels []string
	// NodeLabels select the flavor's Nodes; default
	// {testkit.multikueue.x-k8s.io/tas: "true"}.
	NodeLabels map[string]string
}

// WithDefaults returns t with its defaults filled in.
func (t TAS) WithDefaults() TAS {
	if t.Topology == "" {
		t.Topology = "default"
	}
	if len(t.Levels) == 0 {
		t.Levels = []string{corev1.LabelHostname}
	}
	if len(t.NodeLabels) == 0 {
		t.NodeLabels = map[string]string{"testkit.multikueue.x-k8s.io/tas": "true"}
	}
	return t
}

// Default values.
const (
	DefaultManagerName       = "manager"
	DefaultKueueNamespace    = "kueue-system"
	DefaultOrigin            = "multikueue"
	DefaultGCInterval        = time.Minute
	DefaultWorkerLostTimeout = 15 * time.Minute
	DefaultReadyTimeout      = 2 * time.Minute
)

// Resolve validates o and applies defaults. The error names the first field
// that is wrong.
func (o Options) Resolve() (Spec, error) {
	if o.ManagerName == "" {
		o.ManagerName = DefaultManagerName
	}
	if len(o.WorkerNames) == 0 {
		n := o.Workers
		if n < 1 || n > MaxWorkers {
			return Spec{}, fmt.Errorf("topology: Options.Workers: %d workers requested; a MultiKueueConfig allows 1 to %d", o.Workers, MaxWorkers)
		}
		for i := 1; i <= n; i++ {
			o.WorkerNames = append(o.WorkerNames, fmt.Sprintf("worker-%d", i))
		}
	} else if len(o.WorkerNames) > MaxWorkers {
		return Spec{}, fmt.Errorf("topology: Options.WorkerNames: %d workers named; a MultiKueueConfig allows 1 to %d", len(o.WorkerNames), MaxWorkers)
	} else {
		o.WorkerNames = append([]string(nil), o.WorkerNames...)
	}
	o.Workers = len(o.WorkerNames)

	if errs := validation.IsDNS1123Label(o.ManagerName); len(errs) > 0 {
		return Spec{}, fmt.Errorf("topology: Options.ManagerName: %q is not a valid cluster name: %s", o.ManagerName, errs[0])
	}
	seen := map[string]string{o.ManagerName: "Options.ManagerName"}
	for i, n := range o.WorkerNames {
		field := fmt.Sprintf("Options.WorkerNames[%d]", i)
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return Spec{}, fmt.Errorf("topology: %s: %q is not a valid cluster name: %s", field, n, errs[0])
		}
		if prev, dup := seen[n]; dup {
			return Spec{}, fmt.Errorf("topology: %s: duplicate cluster name %q (also %s)", field, n, prev)
		}
		seen[n] = field
	}
	for name := range o.WorkerQuotas {
		if _, ok := seen[name]; !ok || name == o.ManagerName {
			return Spec{}, fmt.Errorf("topology: Options.WorkerQuotas[%q]: no worker has that name", name)
		}
	}

	s := Spec{Quotas: map[string]corev1.ResourceList{}}
	if o.WorkerQuota == (Quota{}) {
		o.WorkerQuota = Quota{CPU: "4", Memory: "8Gi"}
	}
	total := corev1.ResourceList{}
	for _, n := range o.WorkerNames {
		q, field := o.WorkerQuota, "Options.WorkerQuota"
		if wq, ok := o.WorkerQuotas[n]; ok {
			q, field = wq, fmt.Sprintf("Options.WorkerQuotas[%q]", n)
		}
		rl, err := q.parse(field)
		if err != nil {
			return Spec{}, err
		}
		s.Quotas[n] = rl
		for k, v := range rl {
			sum := total[k]
			sum.Add(v)
			total[k] = sum
		}
	}
	if o.ManagerQuota != nil {
		rl, err := o.ManagerQuota.parse("Options.ManagerQuota")
		if err != nil {
			return Spec{}, err
		}
		s.Quotas[o.ManagerName] = rl
	} else {
		s.Quotas[o.ManagerName] = total
	}

	k := &o.Kueue
	if k.Namespace == "" {
		k.Namespace = DefaultKueueNamespace
	}
	if errs := validation.IsDNS1123Label(k.Namespace); len(errs) > 0 {
		return Spec{}, fmt.Errorf("topology: Options.Kueue.Namespace: %q: %s", k.Namespace, errs[0])
	}
	if len(k.Integrations) == 0 {
		k.Integrations = []string{IntegrationBatchJob}
	}
	if k.Dispatcher == "" {
		k.Dispatcher = DispatcherAllAtOnce
	}
	if k.Origin == "" {
		k.Origin = DefaultOrigin
	}
	if k.GCInterval == nil {
		k.GCInterval = ptrTo(DefaultGCInterval)
	} else if *k.GCInterval < 0 {
		return Spec{}, fmt.Errorf("topology: Options.Kueue.GCInterval: %s is negative (0 disables GC)", *k.GCInterval)
	} else {
		k.GCInterval = ptrTo(*k.GCInterval) // the Spec's own copy, not the caller's
	}
	if k.WorkerLostTimeout == nil {
		k.WorkerLostTimeout = ptrTo(DefaultWorkerLostTimeout)
	} else if *k.WorkerLostTimeout <= 0 {
		return Spec{}, fmt.Errorf("topology: Options.Kueue.WorkerLostTimeout: %s must be positive", *k.WorkerLostTimeout)
	} else {
		k.WorkerLostTimeout = ptrTo(*k.WorkerLostTimeout)
	}

	q := &o.Queues
	if len(q.Namespaces) == 0 {
		q.Namespaces = []string{"default"}
	}
	for i, ns := range q.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return Spec{}, fmt.Errorf("topology: Options.Queues.Namespaces[%d]: %q: %s", i, ns, errs[0])
		}
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&q.ResourceFlavor, "default-flavor")
	def(&q.ClusterQueue, "cluster-queue")
	def(&q.LocalQueue, "user-queue")
	def(&q.MultiKueueConfig, "multikueue")
	def(&q.AdmissionCheck, "multikueue")
	if o.Timeouts.Progress < 0 {
		return Spec{}, fmt.Errorf("topology: Options.Timeouts.Progress: %s is negative", o.Timeouts.Progress)
	}
	if o.Timeouts.Start < 0 {
		return Spec{}, fmt.Errorf("topology: Options.Timeouts.Start: %s is negative", o.Timeouts.Start)
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	s.Options = o
	return s, nil
}

func (q Quota) parse(field string) (corev1.ResourceList, error) {
	rl := corev1.ResourceList{}
	for _, r := range []struct {
		name  corev1.ResourceName
		field string
		val   string
	}{{corev1.ResourceCPU, "CPU", q.CPU}, {corev1.ResourceMemory, "Memory", q.Memory}} {
		if r.val == "" {
			return nil, fmt.Errorf("topology: %s.%s: empty; give a quantity such as \"4\" or \"8Gi\"", field, r.field)
		}
		v, err := resource.ParseQuantity(r.val)
		if err != nil {
			return nil, fmt.Errorf("topology: %s.%s: %q is not a Kubernetes quantity: %v", field, r.field, r.val, err)
		}
		if v.Sign() < 0 {
			return nil, fmt.Errorf("topology: %s.%s: %q is negative", field, r.field, r.val)
		}
		rl[r.name] = v
	}
	return rl, nil
}

// AllClusterNames returns the manager's name followed by the workers'.
func (s Spec) AllClusterNames() []string {
	return append([]string{s.ManagerName}, s.WorkerNames...)
}
