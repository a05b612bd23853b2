package local

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// egressProxy is an HA cluster's stand-in for the network between its API
// server and Kueue's pods. kube-apiserver sends its "cluster" egress — the
// calls to admission webhooks and aggregated API servers named by a Service,
// resolved to an endpoint of the Service (--enable-aggregator-routing) — to
// this proxy as HTTP CONNECT requests over a Unix socket
// (--egress-selector-config-file, the way Konnectivity is wired). The proxy
// connects each request for a replica's placeholder pod address (see
// podAddress) to that replica's port on 127.0.0.1 and refuses every other
// destination: nothing leaves loopback. Webhooks registered by URL (the
// single-replica topology, JobSet) use the control-plane egress, which is
// left direct.
//
// Why not Endpoints at 127.0.0.1: EndpointSlice validation refuses loopback
// addresses ("may not be in the loopback range"), and a ClusterIP is not
// routable here; a Service is the only way to register an APIService.
type egressProxy struct {
	cluster string
	sock    string
	l       net.Listener

	mu     sync.Mutex
	routes map[string]string // "192.0.2.1:9443" → "127.0.0.1:40123"
	conns  map[net.Conn]struct{}
	stats  map[string]*EgressStats
	closed bool
	wg     sync.WaitGroup
}

// EgressStats counts the API server's connections to one replica port
// through the egress proxy.
type EgressStats struct {
	// Connections is how many the API server opened (one per webhook call
	// at most: it calls Service webhooks over HTTP/1.1).
	Connections int
	// Failed is how many of them could not reach the replica (stopped or
	// not listening): each is a failed webhook call or aggregated request.
	Failed int
}

// egressSocket is the proxy's socket in the cluster's directory.
const egressSocket = "egress.sock"

func newEgressProxy(cluster, dir string) (*egressProxy, error) {
	sock := filepath.Join(dir, egressSocket)
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: egress proxy: %w", cluster, err)
	}
	p := &egressProxy{cluster: cluster, sock: sock, l: l, routes: map[string]string{}, conns: map[net.Conn]struct{}{}, stats: map[string]*EgressStats{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// route sends connections for from ("192.0.2.1:9443") to 127.0.0.1:port.
func (p *egressProxy) route(from string, port int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes[from] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// statsFor returns a copy of the counters of from.
func (p *egressProxy) statsFor(from string) EgressStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.stats[from]; s != nil {
		return *s
	}
	return EgressStats{}
}

func (p *egressProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

func (p *egressProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *egressProxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// handle answers one CONNECT and pipes the connection to the replica.
func (p *egressProxy) handle(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if req.Method != http.MethodConnect {
		fmt.Fprintf(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	p.mu.Lock()
	to, ok := p.routes[req.Host]
	st := p.stats[req.Host]
	if ok && st == nil {
		st = &EgressStats{}
		p.stats[req.Host] = st
	}
	if ok {
		st.Connections++
	}
	p.mu.Unlock()
	if !ok {
		// Not a replica: nothing else is reachable from here.
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\n\r\ncluster %q: the local egress proxy connects only to Kueue replicas, not %s\n", p.cluster, req.Host)
		return
	}
	up, err := (&net.Dialer{Timeout: 2 * time.Second}).Dial("tcp", to)
	if err != nil {
		p.mu.Lock()
		st.Failed++
		p.mu.Unlock()
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\n\r\n")
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	if _, err := fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, br) // br holds anything read past the request
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	c.Close()
	up.Close()
	<-done
}

// close stops accepting, cuts every connection and waits for the goroutines.
func (p *egressProxy) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	err := p.l.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
	_ = os.Remove(p.sock)
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// egressSelectorConfig routes the API server's "cluster" egress through the
// proxy's socket.
func egressSelectorConfig(sock string) []byte {
	return fmt.Appendf(nil, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, strconv.Quote(sock))
}

// frontProxyFiles are the aggregation layer's files in a cluster's
// directory: the request-header CA and the client certificate kube-apiserver
// presents to aggregated API servers.
const (
	frontProxyCAFile   = "front-proxy-ca.crt"
	frontProxyCertFile = "front-proxy-client.crt"
	frontProxyKeyFile  = "front-proxy-client.key"
	frontProxyUser     = "front-proxy-client"
	egressConfigFile   = "egress-selector.yaml"
)

// haAPIServerArgs writes the front-proxy PKI and the egress selector
// configuration into dir and returns the kube-apiserver flags that turn on
// the aggregation layer as kubeadm sets it up, endpoint routing for Services,
// and the egress proxy.
func haAPIServerArgs(dir, sock string) ([]string, error) {
	ca, err := newCertAuthority("front-proxy-ca")
	if err != nil {
		return nil, err
	}
	client, err := ca.client(frontProxyUser)
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		frontProxyCAFile: ca.certPEM, frontProxyCertFile: client.cert, frontProxyKeyFile: client.key,
		egressConfigFile: egressSelectorConfig(sock),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	return []string{
		"--egress-selector-config-file=" + f(egressConfigFile),
		"--enable-aggregator-routing=true",
		"--requestheader-client-ca-file=" + f(frontProxyCAFile),
		"--requestheader-allowed-names=" + frontProxyUser,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + f(frontProxyCertFile),
		"--proxy-client-key-file=" + f(frontProxyKeyFile),
	}, nil
}

// withArgs returns args followed by more, without writing into args'
// backing array (it may be the caller's Options.APIServerArgs).
func withArgs(args []string, more ...string) []string {
	return append(slices.Clip(args), more...)
}
