package local

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestForwarderCutAndRestore: bytes pass through; a cut closes the open
// connection and every new one; restoring lets new connections through.
func TestForwarderCutAndRestore(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	f, err := newForwarder(port)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	get := func() error {
		hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get("http://" + f.ln.Addr().String())
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := get(); err != nil {
		t.Fatalf("through the forwarder: %v", err)
	}
	// An open connection is closed by the cut.
	c, err := net.Dial("tcp", f.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatalf("open connection before the cut: %v", err)
	}
	f.setCut(true)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("an open connection survived the cut")
	}
	if err := get(); err == nil {
		t.Error("a new connection got through while cut")
	}
	f.setCut(false)
	if err := get(); err != nil {
		t.Errorf("after restoring: %v", err)
	}
}
