package local

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/multikueue-testkit/testkit/internal/poll"
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
	// cluster (docs/performance.md, "Start-up levers").
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
	dir := filepath.Join(root, sharedEtcdDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		s := &sharedEtcd{}
		if s.port, err = ports.free(); err != nil {
			return nil, err
		}
		var member string
		s.proc, member = newEtcd("", dir, bin, s.port, ports)
		if err = startEtcd(ctx, s.proc, s.port, member, timeout); err == nil {
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
// cluster is "" for a shared etcd. Its member name is random (memberName),
// so that startEtcd can tell it from another etcd that took the port.
func newEtcd(cluster, dir, bin string, port int, ports *portPool) (p *process, memberName string) {
	peerPort, _ := ports.free()
	client := etcdClientURL(port)
	peer := etcdClientURL(peerPort)
	memberName = "mktk-" + rand.Text()[:12]
	return &process{
		name: "etcd", cluster: cluster, path: bin, logPath: filepath.Join(dir, "etcd.log"),
		args: []string{
			"--name=" + memberName,
			"--data-dir=" + filepath.Join(dir, "etcd-data"),
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=" + memberName + "=" + peer,
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		},
	}, memberName
}

// startEtcd starts p and waits until it answers /health on port as the
// member it is (member): an etcd of another topology or process that won
// the port race must not pass for it.
func startEtcd(ctx context.Context, p *process, port int, member string, timeout time.Duration) error {
	if err := p.start(); err != nil {
		return err
	}
	base := etcdClientURL(port)
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	return waitHealthy(ctx, timeout, p, fmt.Sprintf("%s: etcd %s to answer %s/health", p.owner(), member, base), func() error {
		if err := getOK(hc, base+"/health"); err != nil {
			return err
		}
		return isEtcdMember(hc, base, member)
	})
}

// isEtcdMember returns nil when the etcd at base lists a member named name
// (etcd's JSON gateway: POST /v3/cluster/member/list), and errPortInUse
// when it answers with other members only.
func isEtcdMember(hc *http.Client, base, name string) error {
	resp, err := hc.Post(base+"/v3/cluster/member/list", "application/json", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s/v3/cluster/member/list: %s", base, resp.Status)
	}
	var list struct {
		Members []struct {
			Name string `json:"name"`
		} `json:"members"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return fmt.Errorf("POST %s/v3/cluster/member/list: %w", base, err)
	}
	for _, m := range list.Members {
		if m.Name == name {
			return nil
		}
	}
	return poll.Stop(fmt.Errorf("the etcd answering %s is not member %s (members %v): %w", base, name, list.Members, errPortInUse))
}
