package report

import (
	"time"
)

// Schema names the record format; every line carries it. A field is never
// renamed or given another meaning within one version.
const Schema = "multikueue-testkit/report/v1"

// RecordType tells what one line is about.
type RecordType string

const (
	// RecordRun: one run (a topology of N workers, its gates and load).
	RecordRun RecordType = "run"
	// RecordCluster: one cluster of one run.
	RecordCluster RecordType = "cluster"
	// RecordWorkload: one submitted job and its Workload.
	RecordWorkload RecordType = "workload"
	// RecordTransition: a MultiKueueCluster Active transition.
	RecordTransition RecordType = "transition"
	// RecordAssertion: one assertion's verdict.
	RecordAssertion RecordType = "assertion"
)

// Header starts every record.
type Header struct {
	Schema string     `json:"schema"`
	Record RecordType `json:"record"`
	// Run identifies the run ("w05" for 5 workers in a scale run).
	Run string `json:"run"`
	// Cluster the record is keyed by; empty only on run records.
	Cluster string `json:"cluster,omitempty"`
}

// Phases of a run.
const (
	PhaseStart = "start"
	PhaseSmoke = "smoke"
	PhaseLoad  = "load"
	PhaseDone  = "done"
)

// Run summarises one run.
type Run struct {
	Header
	// Workers in the topology (the manager comes on top).
	Workers int `json:"workers"`
	// Jobs submitted by the load.
	Jobs int `json:"jobs"`
	// Provider that made the clusters ("local").
	Provider string `json:"provider,omitempty"`
	// Started is when the topology's start began.
	Started time.Time `json:"started"`
	// StartupSeconds: from the start of the topology until it returned with
	// every MultiKueueCluster Active; 0 when it did not start.
	StartupSeconds float64 `json:"startup_seconds"`
	// LoadSeconds: from the first load submission until every load
	// assertion returned.
	LoadSeconds float64 `json:"load_seconds"`
	// DurationSeconds: the whole run, teardown excluded.
	DurationSeconds float64 `json:"duration_seconds"`
	// MemoryAfterStartBytes is the memory of this process and every
	// process it started (etcd, kube-apiserver, ...) once the topology was
	// up, as proportional set size (PSS: pages shared between processes,
	// such as one binary's text, count once in all); MemoryPeakBytes the
	// highest value sampled (every 2 s) during the run. Linux only; 0
	// elsewhere.
	MemoryAfterStartBytes int64 `json:"memory_after_start_bytes"`
	MemoryPeakBytes       int64 `json:"memory_peak_bytes"`
	// Passed: every gate and assertion held.
	Passed bool `json:"passed"`
	// Phase reached: "start", "smoke", "load" (where it failed) or "done".
	Phase string `json:"phase"`
	// FailureClass, on failure: "infrastructure", "behaviour" or "other"
	// (scenario.Classify).
	FailureClass string `json:"failure_class,omitempty"`
	// Error, on failure: the first lines of the error, redacted.
	Error string `json:"error,omitempty"`
	// Artifacts, on failure: the directory the clusters' log tails were
	// copied to.
	Artifacts string `json:"artifacts,omitempty"`
}

// Dist is a latency distribution in milliseconds: nearest-rank
// percentiles. Count 0 leaves the rest 0.
type Dist struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
}

// Cluster is one cluster's figures in one run.
type Cluster struct {
	Header
	// Role: "manager" or "worker".
	Role string `json:"role"`
	// Placements: load workloads whose manager clusterName ended on this
	// worker.
	Placements int `json:"placements"`
	// RemoteCopies: Workloads MultiKueue created on this worker (winning
	// and losing copies), load and smoke.
	RemoteCopies int `json:"remote_copies"`
	// Latencies of the load workloads placed on this worker (loser cleanup:
	// of the losing copies deleted from it). See the Workload fields.
	DispatchLatencyMS Dist `json:"dispatch_latency_ms"`
	RemoteAdmissionMS Dist `json:"remote_admission_ms"`
	StatusSyncLagMS   Dist `json:"status_sync_lag_ms"`
	LoserCleanupMS    Dist `json:"loser_cleanup_ms"`
	// APIRequests the library's Observer made to this cluster during the
	// run (informers' lists and watches).
	APIRequests int64 `json:"api_requests"`
	// MemoryBytes: memory (PSS) of this cluster's own processes after
	// start (etcd, kube-apiserver, kube-controller-manager); Kueue runs in
	// the test process and is not in it, nor is an etcd the clusters share
	// (local.EtcdShared, the default from local.BigTopologyWorkers
	// workers). Linux and the local provider only; 0 elsewhere.
	MemoryBytes int64 `json:"memory_bytes"`
	// ActiveSeconds, on workers: from the run's start to the
	// lastTransitionTime of its MultiKueueCluster's Active condition (one
	// second precision); absent when unknown.
	ActiveSeconds *float64 `json:"active_seconds,omitempty"`
	// ActiveTransitions: how many Active transitions were recorded for its
	// MultiKueueCluster (see the transition records).
	ActiveTransitions int `json:"active_transitions"`
}

// Workload is one submitted job. Its Cluster is the worker it was placed
// on (the manager's last clusterName), or the manager when it never was.
// A latency is null when its end was never reached.
type Workload struct {
	Header
	// Phase: "smoke" or "load".
	Phase string `json:"phase"`
	// Kind of the job object ("Job").
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Workload is the manager Workload's name; empty when none was found.
	Workload string `json:"workload"`
	// Created: the manager job object's creation, as observed.
	Created time.Time `json:"created"`
	// DispatchLatencyMS: the manager job object created → the selected
	// worker's copy of the Workload Admitted.
	DispatchLatencyMS *float64 `json:"dispatch_latency_ms"`
	// RemoteAdmissionMS: the selected worker's copy created → Admitted there.
	RemoteAdmissionMS *float64 `json:"remote_admission_ms"`
	// StatusSyncLagMS: the remote job object Succeeded/Failed → the manager's
	// job object Succeeded/Failed.
	StatusSyncLagMS *float64 `json:"status_sync_lag_ms"`
	// LoserCleanupMS: the selected worker's copy Admitted → the last losing
	// copy deleted (MultiKueue deletes them once the winner is admitted,
	// before it writes clusterName on the manager); null when there was no
	// losing copy or one is left.
	LoserCleanupMS *float64 `json:"loser_cleanup_ms"`
	// Losers: workers other than the selected one that got a copy.
	Losers int `json:"losers"`
	// Outcome of the manager's job object: "Succeeded", "Failed" or "".
	Outcome string `json:"outcome"`
}

// Transition is a MultiKueueCluster Active transition recorded on the
// manager; its Cluster is the worker the MultiKueueCluster stands for. The
// first one of a run is the state found when the Observer started.
type Transition struct {
	Header
	Time time.Time `json:"time"`
	// OffsetSeconds from the run's start.
	OffsetSeconds float64 `json:"offset_seconds"`
	Active        bool    `json:"active"`
	Reason        string  `json:"reason"`
	Message       string  `json:"message"`
}

// Assertion is one assertion's verdict. Its Cluster is the cluster the
// failure names first, else the worker the workload was placed on, else
// the manager.
type Assertion struct {
	Header
	// Phase: "smoke" or "load".
	Phase     string `json:"phase"`
	Assertion string `json:"assertion"`
	// Object judged ("Job default/load-3"); empty for topology-wide ones.
	Object string `json:"object,omitempty"`
	Passed bool   `json:"passed"`
	// Class of a failure: "behaviour", "infrastructure" or "other".
	Class string `json:"class,omitempty"`
	// Message: the failure's first lines, redacted.
	Message    string  `json:"message,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// RunReport is every record of one run.
type RunReport struct {
	Run         Run
	Clusters    []Cluster
	Workloads   []Workload
	Transitions []Transition
	Assertions  []Assertion
}

func header(t RecordType, run, cluster string) Header {
	return Header{Schema: Schema, Record: t, Run: run, Cluster: cluster}
}
