// Package report records what a MultiKueue run measured, per cluster and per
// workload, and writes it as versioned JSON lines, plots and one
// self-contained HTML page.
//
// Everything is derived from the Observer's history (every event carries
// its cluster, type and time), so a report costs no API requests:
//
//   - per workload: dispatch latency (the manager's job object created →
//     the selected worker's copy of its Workload admitted), remote admission
//     latency (that copy created → admitted), status-sync lag (the remote job
//     object finished → the manager's job object finished) and loser-cleanup
//     latency (the selected worker's copy admitted → the last losing copy
//     deleted);
//   - per cluster: placements, the percentiles of those latencies (each
//     latency counts for the worker it was measured on; loser cleanup for the
//     worker whose copy was deleted), the API requests the Observer made to
//     it (Counter, through observe.Options.WrapTransport), the memory
//     (proportional set size) of its processes (Linux; the local provider's etcd,
//     kube-apiserver and kube-controller-manager), when its
//     MultiKueueCluster last became Active and every Active transition seen,
//     with reasons;
//   - each assertion's verdict, with the class of a failure
//     (scenario.Classify: infrastructure or MultiKueue behaviour).
//
// Files (Write): report.jsonl holds every record of every run; one file per
// cluster, clusters/<cluster>.jsonl, holds the records keyed by that
// cluster. Each line is one JSON object with "schema" (Schema), "record"
// (the record type), "run" and, except run records, "cluster". The fields
// are documented on the record types and in schema.json (JSON Schema
// 2020-12, embedded: SchemaJSON), which a test validates real output
// against. A field is never renamed or given another meaning within a
// schema version; new optional fields may appear.
//
// Scale runs a topology at several worker counts (a smoke gate, then the
// load) and writes all of it with plots (gonum.org/v1/plot) and report.html;
// `mktk scale` is its command line.
package report
