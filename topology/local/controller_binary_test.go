package local

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// portHelperEnv makes the test binary, run as TestPortHelper, a stand-in
// controller: it serves /readyz on the port the variable names, or exits
// as a controller does when another process holds it.
const portHelperEnv = "MKTK_TEST_PORT_HELPER_HEALTH"

// TestPortHelper is the stand-in controller of
// TestControllerBinaryRetriesAPortTakenBeforeItBinds (not a test of its
// own: it does nothing unless run by that test).
func TestPortHelper(t *testing.T) {
	port := os.Getenv(portHelperEnv)
	if port == "" {
		t.Skip("run by TestControllerBinaryRetriesAPortTakenBeforeItBinds")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the health probe server: %v\n", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	_ = http.Serve(ln, mux) //nolint:gosec // a loopback test server, killed by the test
}

// TestControllerBinaryRetriesAPortTakenBeforeItBinds: a port handed out
// by the pool is only free when it is taken; another process may bind it
// before the controller does (a CI run lost kueue-1's start this way). The
// controller then exits with "address already in use", and start takes new
// ports, configures the binary again and starts it on them.
func TestControllerBinaryRetriesAPortTakenBeforeItBinds(t *testing.T) {
	dir := t.TempDir()
	cp := &controlPlane{ports: &portPool{}}
	b := &controllerBinary{name: "helper", cluster: "c", path: os.Args[0], version: "test", dir: filepath.Join(dir, "helper"),
		timeout: 30 * time.Second, noWebhooks: true}
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := b.allocate(cp); err != nil {
		t.Fatal(err)
	}
	configured, changed := 0, 0
	b.configure = func() error {
		configured++
		b.args = []string{"-test.run=^TestPortHelper$"}
		b.env = []string{portHelperEnv + "=" + strconv.Itoa(b.healthPort)}
		return nil
	}
	b.portsChanged = func() { changed++ }
	taken := b.healthPort
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(taken)))
	if err != nil {
		t.Fatalf("hold port %d: %v", taken, err)
	}
	defer ln.Close()

	if err := b.start(context.Background()); err != nil {
		t.Fatalf("start with its health port taken: %v", err)
	}
	defer func() { _ = b.stop() }()
	if b.healthPort == taken || configured != 2 || changed != 1 {
		t.Errorf("health port %d (taken: %d), configured %d times, told of new ports %d times; want another port, 2, 1", b.healthPort, taken, configured, changed)
	}
	if err := getOK(&http.Client{Timeout: 2 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/readyz", b.healthPort)); err != nil {
		t.Errorf("the restarted helper: %v", err)
	}
}
