package local

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// EtcdMode chooses how a local topology's API servers store their data
// (Options.Etcd).
type EtcdMode string

const (
	// EtcdAuto, the default: one etcd per cluster below BigTopologyWorkers
	// workers, one shared etcd from there (see EtcdShared for why).
	EtcdAuto EtcdMode = ""
	// EtcdPerCluster gives every cluster its own etcd process.
	EtcdPerCluster EtcdMode = "per-cluster"
	// EtcdShared runs one etcd for the whole topology; every API server
	// keeps its data under its own key prefix (--etcd-prefix
	// /registry/<cluster>), so the clusters see nothing of each other.
	// Cluster.Lifecycle's StopAPIServer and StartAPIServer keep the etcd
	// running, as they keep a cluster's own. It saves one etcd process per
	// cluster (README, "Start-up levers").
	EtcdShared EtcdMode = "shared"
)

func (m EtcdMode) validate() error {
	switch m {
	case EtcdAuto, EtcdPerCluster, EtcdShared:
		return nil
	}
	return fmt.Errorf("local: Options.Etcd: %q is not %q, %q or empty (auto)", string(m), EtcdPerCluster, EtcdShared)
}

// shared reports whether a topology with that many workers shares one etcd.
func (m EtcdMode) shared(workers int) bool {
	return m == EtcdShared || (m == EtcdAuto && workers >= BigTopologyWorkers)
}

// sharedEtcd is the one etcd of a topology whose clusters share it.
type sharedEtcd struct {
	port int
	proc *process
}

// sharedEtcdDir is the shared etcd's directory below the topology's; no
// cluster's name (a DNS label) can take it.
const sharedEtcdDir = "_shared-etcd"

// prefix is the key prefix of cluster's API server: below /registry, the
// API server's own default, so that etcd keys still read as Kubernetes'.
func (s *sharedEtcd) prefix(cluster string) string { return "/registry/" + cluster }

func (s *sharedEtcd) url() string { return etcdClientURL(s.port) }

// startSharedEtcd starts the topology's shared etcd below root; a start that
// loses a port race is retried on fresh ports.
func startSharedEtcd(ctx context.Context, root, bin string, ports *portPool, timeout time.Duration) (*sharedEtcd, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		s := &sharedEtcd{}
		if s.port, err = ports.free(); err != nil {
			return nil, err
		}
		dir := filepath.Join(root, sharedEtcdDir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		s.proc = newEtcd("", dir, bin, s.port, ports)
		if err = startEtcd(ctx, s.proc, s.port, timeout); err == nil {
			return s, nil
		}
		_ = s.proc.stop(procStopTimeout)
		if !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
	return nil, err
}

func (s *sharedEtcd) stop() error {
	if s == nil {
		return nil
	}
	return s.proc.stop(procStopTimeout)
}

func etcdClientURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

// newEtcd is an etcd with its data and log in dir, serving clients on port.
// cluster is "" for a shared etcd.
func newEtcd(cluster, dir, bin string, port int, ports *portPool) *process {
	peerPort, _ := ports.free()
	client := etcdClientURL(port)
	peer := etcdClientURL(peerPort)
	return &process{
		name: "etcd", cluster: cluster, path: bin, logPath: filepath.Join(dir, "etcd.log"),
		args: []string{
			"--name=default",
			"--data-dir=" + filepath.Join(dir, "etcd-data"),
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		},
	}
}

// startEtcd starts p and waits until it answers /health on port.
func startEtcd(ctx context.Context, p *process, port int, timeout time.Duration) error {
	if err := p.start(); err != nil {
		return err
	}
	url := etcdClientURL(port) + "/health"
	hc := &http.Client{Timeout: time.Second}
	return waitHealthy(ctx, timeout, p, fmt.Sprintf("%s: etcd to answer %s", p.owner(), url), func() error { return getOK(hc, url) })
}
