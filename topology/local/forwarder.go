package local

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// forwarder is a TCP forwarder on 127.0.0.1 to one loopback port that can
// be cut: every open connection closed at once and new ones closed as soon
// as they are accepted, until it is restored. An HA replica reaches its API
// server through one (PartitionReplica cuts it) and is reached at its
// visibility server through another (StopVisibility cuts it). It forwards
// bytes only: TLS is end to end.
type forwarder struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// newForwarder listens on a port of the kernel's choosing (bound at once:
// no other process can take it) and forwards to targetPort.
func newForwarder(targetPort int) (*forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &forwarder{ln: ln, target: net.JoinHostPort("127.0.0.1", strconv.Itoa(targetPort)), conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

// address is https://127.0.0.1:<port>.
func (f *forwarder) url() string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port()))
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !f.track(c) {
			c.Close()
			continue
		}
		f.wg.Add(1)
		go f.handle(c)
	}
}

// track registers c unless the forwarder is cut or closed.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut || f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

// setTarget points new connections at another loopback port.
func (f *forwarder) setTarget(port int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

func (f *forwarder) handle(c net.Conn) {
	defer f.wg.Done()
	f.mu.Lock()
	target := f.target
	f.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		f.untrack(c)
		c.Close()
		return
	}
	if !f.track(up) {
		f.untrack(c)
		c.Close()
		up.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	f.untrack(c, up)
}

// setCut cuts (true) or restores (false) the forwarder.
func (f *forwarder) setCut(cut bool) {
	f.mu.Lock()
	f.cut = cut
	var open []net.Conn
	if cut {
		for c := range f.conns {
			open = append(open, c)
		}
	}
	f.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// close stops listening, closes every connection and waits for the
// goroutines. Nil-safe.
func (f *forwarder) close() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	err := f.ln.Close()
	f.setCut(true)
	f.wg.Wait()
	return err
}
