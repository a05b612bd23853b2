package local

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/multikueue-testkit/testkit/internal/poll"
)

// controllerBinary is a controller-runtime controller (Kueue, JobSet, ...)
// run as its real binary: a child process with its own working directory
// below the cluster's, a health port whose /readyz says when it is ready
// and a webhook server on 127.0.0.1 with a certificate of the cluster's CA.
// Stopping it is a SIGKILL, as a pod's kill would be; starting it again
// runs the same binary with the same files and ports.
type controllerBinary struct {
	// name is the component ("kueue", "jobset"): its log is
	// <cluster dir>/<name>.log.
	name    string
	cluster string
	path    string
	// version is what the binary is, for messages.
	version string
	dir     string
	args    []string
	timeout time.Duration
	caPEM   []byte

	webhookPort, healthPort, metricsPort int
	// hostname, when set, is the process's own host name (process.hostname).
	hostname string
	// env is added to the process's environment.
	env []string
	// noWebhooks: the controller serves no webhooks (webhookPort unused).
	noWebhooks bool
	// lateWebhooks: the controller adds its webhook handlers only after it
	// answers /readyz (the Kubeflow Trainer sets them up in a goroutine once
	// its certificates are ready) and serves every path its registrations
	// name, so a 404 means "not yet", not "not served".
	lateWebhooks bool

	// configure writes the files and args that name the ports; start calls
	// it again after new ports were taken (a start that lost a port race).
	configure func() error
	// portsChanged, when set, is told after new ports were taken and
	// configured (the HA replicas' routes follow them).
	portsChanged func()

	ports *portPool
	extra []*int

	proc *process
}

// allocate takes the ports the controller listens on from the cluster's
// pool; extra are more ports of its own. start takes them all again when
// another process bound one of them first.
func (b *controllerBinary) allocate(cp *controlPlane, extra ...*int) error {
	b.ports, b.extra = cp.ports, extra
	return b.takePorts()
}

func (b *controllerBinary) takePorts() error {
	for _, port := range append([]*int{&b.webhookPort, &b.healthPort, &b.metricsPort}, b.extra...) {
		var err error
		if *port, err = b.ports.free(); err != nil {
			return err
		}
	}
	return nil
}

// writeServingCert puts one serving certificate of the cluster's CA (for
// 127.0.0.1) into each of dirs (relative to the working directory) as
// tls.crt and tls.key.
func (b *controllerBinary) writeServingCert(cp *controlPlane, dirs ...string) error {
	serving, err := cp.ca.serving(b.name)
	if err != nil {
		return err
	}
	return b.writeCert(cp, serving, dirs...)
}

// writeCert puts kp, a serving certificate of the cluster's CA, into each
// of dirs (relative to the working directory) as tls.crt and tls.key.
func (b *controllerBinary) writeCert(cp *controlPlane, serving keyPair, dirs ...string) error {
	b.caPEM = cp.ca.certPEM
	for _, d := range dirs {
		d = filepath.Join(b.dir, d)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "tls.crt"), serving.cert, 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "tls.key"), serving.key, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// start runs the binary and waits until it says it is ready (/readyz on
// its health port) and its webhook server presents a certificate of the
// cluster's CA (not another server's that took the port). A port is only
// the kernel's free one when it was taken: another process (any outgoing
// connection on the machine) may bind it before the binary does; then the
// binary exits with "address already in use" and start takes new ports,
// configures the binary again and retries (3 attempts).
func (b *controllerBinary) start(ctx context.Context) error {
	if b.configure != nil {
		if err := b.configure(); err != nil {
			return fmt.Errorf("cluster %q: configure %s: %w", b.cluster, b.name, err)
		}
	}
	var err error
	for attempt := 1; ; attempt++ {
		err = b.startOnce(ctx)
		if !errors.Is(err, errPortInUse) || b.ports == nil || b.configure == nil || attempt == 3 {
			return err
		}
		if err := b.takePorts(); err != nil {
			return fmt.Errorf("cluster %q: new ports for %s: %w", b.cluster, b.name, err)
		}
		if err := b.configure(); err != nil {
			return fmt.Errorf("cluster %q: configure %s: %w", b.cluster, b.name, err)
		}
		if b.portsChanged != nil {
			b.portsChanged()
		}
	}
}

func (b *controllerBinary) startOnce(ctx context.Context) error {
	if b.proc != nil {
		if done, _ := b.proc.exited(); !done {
			return fmt.Errorf("cluster %q: %s is already running", b.cluster, b.name)
		}
	}
	b.proc = &process{name: b.name, cluster: b.cluster, path: b.path, args: b.args, dir: b.dir, hostname: b.hostname, env: b.env,
		logPath: filepath.Join(filepath.Dir(b.dir), b.name+".log")}
	if err := b.proc.start(); err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", b.healthPort)
	hook := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.webhookPort))
	what := fmt.Sprintf("cluster %q: %s %s to answer %s and serve webhooks on %s", b.cluster, b.name, b.version, ready, hook)
	if b.noWebhooks {
		what = fmt.Sprintf("cluster %q: %s %s to answer %s", b.cluster, b.name, b.version, ready)
	}
	err := waitHealthy(ctx, b.timeout, b.proc, what, func() error {
		if err := getOK(hc, ready); err != nil || b.noWebhooks {
			return err
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", hook, b.tlsConfig())
		if err != nil {
			return err
		}
		return conn.Close()
	})
	if err != nil {
		_ = b.proc.stop(procStopTimeout)
		return err
	}
	return nil
}

func (b *controllerBinary) tlsConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.caPEM)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// stop SIGKILLs the process and waits for it.
func (b *controllerBinary) stop() error {
	if b == nil || b.proc == nil {
		return nil
	}
	return b.proc.stop(procStopTimeout)
}

// terminate stops the process as a deleted pod's: SIGTERM, then SIGKILL
// after grace.
func (b *controllerBinary) terminate(grace time.Duration) error {
	if b == nil || b.proc == nil {
		return nil
	}
	return b.proc.terminate(grace)
}

// running reports whether the process was started and has not exited.
func (b *controllerBinary) running() bool {
	if b == nil || b.proc == nil {
		return false
	}
	done, _ := b.proc.exited()
	return !done
}

// servedPaths asks the webhook server which of paths it serves: a
// controller registers webhooks only for what it runs (Kueue for its
// enabled integrations), and controller-runtime answers 404 for any other
// path. A registration of an unserved webhook would make the API server
// reject those objects. For a controller with lateWebhooks a 404 is
// waited out: every path must come to be served.
func (b *controllerBinary) servedPaths(ctx context.Context, paths []string) (func(string) bool, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: b.tlsConfig()}}
	defer hc.CloseIdleConnections()
	served := map[string]bool{}
	for _, path := range paths {
		url := fmt.Sprintf("https://127.0.0.1:%d%s", b.webhookPort, path)
		err := poll.Until(ctx, b.timeout, fmt.Sprintf("cluster %q: %s's webhook server to answer POST %s", b.cluster, b.name, url), func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte("{}")))
			if err != nil {
				return poll.Stop(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if b.lateWebhooks && resp.StatusCode == http.StatusNotFound {
				return errors.New("404: its handler is not registered yet")
			}
			served[path] = resp.StatusCode != http.StatusNotFound
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return func(path string) bool { return served[path] }, nil
}
