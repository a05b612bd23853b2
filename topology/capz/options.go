package capz

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
)

// Options say which Clusters Provision creates on the management cluster and
// how long it waits for them.
type Options struct {
	// Management is the CAPI management cluster: in a CAPZ e2e spec,
	// existing.Proxy(bootstrapClusterProxy). Its Client, when set (the
	// proxy's GetClient()), is used as is: only core types and unstructured
	// CAPI objects are read and written. Required.
	Management existing.Cluster
	// Namespace on the management cluster that holds the Clusters and their
	// kubeconfig Secrets; it must exist. Default "default".
	Namespace string
	// ClusterClass is spec.topology.classRef of every Cluster, an AKS
	// ClusterClass such as the one of CAPZ's aks-clusterclass flavor.
	// Required; it must exist before Provision.
	ClusterClass ClassRef
	// KubernetesVersion is spec.topology.version, for example "v1.33.2".
	// Required.
	KubernetesVersion string
	// Manager and Workers are the Clusters to create. Their names are the
	// clusters' names in the topology (topology.Options.ManagerName and
	// WorkerNames are set from them), so a worker's name is also its
	// MultiKueueCluster's name.
	Manager ClusterSpec
	Workers []ClusterSpec
	// MachinePools are the worker pools of a ClusterSpec that lists none.
	// Default AKSMachinePools(): mp-0 (default-system) and mp-1
	// (default-worker), one replica each, as in CAPZ's aks-topology flavor.
	MachinePools []MachinePool
	// Variables are spec.topology.variables of every Cluster (the AKS
	// location, a VM size... whatever the ClusterClass defines); a
	// ClusterSpec's own variable of the same name wins. Values must be JSON.
	Variables map[string]any
	// Labels go on every Cluster, besides LabelRole and LabelManager.
	Labels map[string]string

	// ReadyTimeout bounds the wait for all Clusters (created in parallel)
	// to be ready. Default 45 minutes; AKS takes 10 to 20.
	ReadyTimeout time.Duration
	// DeleteTimeout bounds Close's wait for the Clusters to be gone.
	// Default 30 minutes.
	DeleteTimeout time.Duration
	// PollInterval between two reads of the Clusters' state; default 10
	// seconds.
	PollInterval time.Duration
	// KeepClusters leaves the Clusters in place on Close (for debugging, or
	// to reuse them from the next spec with Attach); Close then deletes only
	// what the topology created on them (MultiKueue objects, queues,
	// credentials).
	KeepClusters bool

	// Kueue says how Kueue gets onto the new clusters.
	Kueue KueueInstall
}

// ClassRef names a ClusterClass.
type ClassRef struct {
	Name string
	// Namespace defaults to the Clusters' namespace.
	Namespace string
}

// ClusterSpec is one Cluster to create.
type ClusterSpec struct {
	// Name of the CAPI Cluster; a DNS-1123 label.
	Name string
	// MachinePools are spec.topology.workers.machinePools; default
	// Options.MachinePools.
	MachinePools []MachinePool
	// Variables override Options.Variables by name.
	Variables map[string]any
	// Labels are added to Options.Labels.
	Labels map[string]string
}

// MachinePool is one entry of spec.topology.workers.machinePools. AKS
// clusters have MachinePool workers only (one per AKS node pool); a
// ClusterClass for AKS has at least a System pool class.
type MachinePool struct {
	// Name is the pool's name in the topology (label
	// topology.cluster.x-k8s.io/pool-name on the MachinePool CAPI makes).
	Name string
	// Class is the ClusterClass's machinePool class, e.g. "default-system".
	Class string
	// Replicas is the pool's node count; 0 means none. Must be 0 when
	// MaxSize is set.
	Replicas int32
	// MinSize and MaxSize, when MaxSize > 0, set the cluster-api autoscaler
	// annotations (cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size
	// and -max-size) on the pool and leave replicas to the autoscaler: CAPI
	// starts the MachinePool at MinSize, and Provision waits for MinSize ready
	// replicas. (AKS's own autoscaler is configured in the ClusterClass's
	// AzureManagedMachinePoolTemplate instead.)
	MinSize, MaxSize int32
}

// AKSMachinePools are the pools of CAPZ's aks-topology flavor: a System pool
// and a User pool, one node each.
func AKSMachinePools() []MachinePool {
	return []MachinePool{
		{Name: "mp-0", Class: "default-system", Replicas: 1},
		{Name: "mp-1", Class: "default-worker", Replicas: 1},
	}
}

// wanted is the number of ready replicas Provision waits for.
func (mp MachinePool) wanted() int32 {
	if mp.MaxSize > 0 {
		return mp.MinSize
	}
	return mp.Replicas
}

// Defaults.
const (
	DefaultNamespace     = "default"
	DefaultReadyTimeout  = 45 * time.Minute
	DefaultDeleteTimeout = 30 * time.Minute
	DefaultPollInterval  = 10 * time.Second
)

// resolve checks o and applies the defaults. Errors name the field.
func (o *Options) resolve() error {
	if err := checkManagement(o.Management, "Options.Management"); err != nil {
		return err
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("capz: Options.Namespace: %q: %s", o.Namespace, errs[0])
	}
	if o.ClusterClass.Name == "" {
		return errors.New("capz: Options.ClusterClass.Name: empty; name the AKS ClusterClass (e.g. the one of CAPZ's aks-clusterclass flavor)")
	}
	if o.ClusterClass.Namespace == "" {
		o.ClusterClass.Namespace = o.Namespace
	}
	if o.KubernetesVersion == "" {
		return errors.New("capz: Options.KubernetesVersion: empty; spec.topology.version is required (e.g. \"v1.33.2\")")
	}
	if _, err := version.ParseSemantic(strings.TrimPrefix(o.KubernetesVersion, "v")); err != nil || !strings.HasPrefix(o.KubernetesVersion, "v") {
		return fmt.Errorf("capz: Options.KubernetesVersion: %q is not a version like \"v1.33.2\"", o.KubernetesVersion)
	}
	if len(o.Workers) == 0 {
		return errors.New("capz: Options.Workers: no worker Cluster given")
	}
	if len(o.Workers) > topology.MaxWorkers {
		return fmt.Errorf("capz: Options.Workers: %d given; a MultiKueueConfig allows 1 to %d", len(o.Workers), topology.MaxWorkers)
	}
	if len(o.MachinePools) == 0 {
		o.MachinePools = AKSMachinePools()
	}
	if err := checkPools(o.MachinePools, "Options.MachinePools"); err != nil {
		return err
	}
	if err := checkVariables(o.Variables, "Options.Variables"); err != nil {
		return err
	}
	if err := checkLabels(o.Labels, "Options.Labels"); err != nil {
		return err
	}
	seen := map[string]string{}
	for i, cs := range append([]ClusterSpec{o.Manager}, o.Workers...) {
		field := "Options.Manager"
		if i > 0 {
			field = fmt.Sprintf("Options.Workers[%d]", i-1)
		}
		if cs.Name == "" {
			return fmt.Errorf("capz: %s.Name: empty", field)
		}
		if errs := validation.IsDNS1123Label(cs.Name); len(errs) > 0 {
			return fmt.Errorf("capz: %s.Name: %q is not a valid Cluster name: %s", field, cs.Name, errs[0])
		}
		if prev, dup := seen[cs.Name]; dup {
			return fmt.Errorf("capz: %s.Name: duplicate Cluster name %q (also %s)", field, cs.Name, prev)
		}
		seen[cs.Name] = field
		if err := checkPools(cs.MachinePools, field+".MachinePools"); err != nil {
			return err
		}
		if err := checkVariables(cs.Variables, field+".Variables"); err != nil {
			return err
		}
		if err := checkLabels(cs.Labels, field+".Labels"); err != nil {
			return err
		}
		for k := range cs.Labels {
			if k == LabelRole || k == LabelManager {
				return fmt.Errorf("capz: %s.Labels[%q]: set by this package", field, k)
			}
		}
	}
	for k := range o.Labels {
		if k == LabelRole || k == LabelManager {
			return fmt.Errorf("capz: Options.Labels[%q]: set by this package", k)
		}
	}
	if o.ReadyTimeout < 0 || o.DeleteTimeout < 0 || o.PollInterval < 0 {
		return errors.New("capz: Options.ReadyTimeout, DeleteTimeout and PollInterval may not be negative")
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.DeleteTimeout == 0 {
		o.DeleteTimeout = DefaultDeleteTimeout
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	return nil
}

// names returns the manager's and the workers' Cluster names.
func (o *Options) names() (string, []string) {
	workers := make([]string, len(o.Workers))
	for i, w := range o.Workers {
		workers[i] = w.Name
	}
	return o.Manager.Name, workers
}

// pools returns the pools of cs.
func (o *Options) pools(cs ClusterSpec) []MachinePool {
	if len(cs.MachinePools) > 0 {
		return cs.MachinePools
	}
	return o.MachinePools
}

func checkManagement(m existing.Cluster, field string) error {
	if m.Config == nil {
		return fmt.Errorf("capz: %s.Config: nil; pass existing.Proxy(bootstrapClusterProxy) or existing.Kubeconfig(...)", field)
	}
	if m.Config.Host == "" {
		return fmt.Errorf("capz: %s.Config.Host: empty", field)
	}
	return nil
}

func checkPools(pools []MachinePool, field string) error {
	seen := map[string]bool{}
	for i, mp := range pools {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case mp.Name == "":
			return fmt.Errorf("capz: %s.Name: empty", f)
		case seen[mp.Name]:
			return fmt.Errorf("capz: %s.Name: duplicate pool name %q", f, mp.Name)
		case mp.Class == "":
			return fmt.Errorf("capz: %s.Class: empty; name a machinePool class of the ClusterClass", f)
		case mp.Replicas < 0:
			return fmt.Errorf("capz: %s.Replicas: %d is negative", f, mp.Replicas)
		case mp.MinSize < 0 || mp.MaxSize < 0:
			return fmt.Errorf("capz: %s.MinSize/MaxSize: %d/%d; negative", f, mp.MinSize, mp.MaxSize)
		case mp.MaxSize == 0 && mp.MinSize > 0:
			return fmt.Errorf("capz: %s.MaxSize: 0 with MinSize %d; set both for the autoscaler, or neither", f, mp.MinSize)
		case mp.MaxSize > 0 && mp.MinSize > mp.MaxSize:
			return fmt.Errorf("capz: %s.MinSize: %d is above MaxSize %d", f, mp.MinSize, mp.MaxSize)
		case mp.MaxSize > 0 && mp.Replicas != 0:
			return fmt.Errorf("capz: %s.Replicas: %d set together with MinSize/MaxSize; the autoscaler owns an autoscaled pool's replicas (CAPI's topology would reset them), leave Replicas 0", f, mp.Replicas)
		}
		if errs := validation.IsDNS1123Label(mp.Name); len(errs) > 0 {
			return fmt.Errorf("capz: %s.Name: %q: %s", f, mp.Name, errs[0])
		}
		seen[mp.Name] = true
	}
	return nil
}

func checkVariables(vars map[string]any, field string) error {
	for k, v := range vars {
		if k == "" {
			return fmt.Errorf("capz: %s: empty variable name", field)
		}
		if _, err := json.Marshal(v); err != nil {
			return fmt.Errorf("capz: %s[%q]: not JSON: %v", field, k, err)
		}
	}
	return nil
}

func checkLabels(labels map[string]string, field string) error {
	for k, v := range labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("capz: %s: key %q: %s", field, k, errs[0])
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("capz: %s[%q]: value %q: %s", field, k, v, errs[0])
		}
	}
	return nil
}
