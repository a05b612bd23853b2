package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

const helperEnv = "MKTK_CLEANUP_HELPER"

// TestCleanupHelper is not a test: the tests below run it in a child process
// that starts a topology, prints its directory, then panics or hangs.
func TestCleanupHelper(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process only")
	}
	topo, err := local.New(context.Background(), topology.Options{Workers: 1}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	fmt.Printf("DIR=%s\n", topo.Provider().(*local.Provider).Dir())
	switch mode {
	case "panic":
		panic("the test panics with a topology up")
	case "hang":
		<-context.Background().Done() // until the parent kills us
	}
}

// startHelper runs TestCleanupHelper in a child and returns it with the
// topology directory it printed.
func startHelper(t *testing.T, mode string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCleanupHelper$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if dir, ok := strings.CutPrefix(sc.Text(), "DIR="); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd, dir
		}
	}
	_ = cmd.Wait()
	t.Fatalf("helper (%s) exited without starting a topology", mode)
	return nil, ""
}

func waitGone(t *testing.T, dir string) {
	t.Helper()
	err := poll.Until(context.Background(), 30*time.Second, "every process of "+dir+" to exit", func(context.Context) error {
		if left := local.ProcessesUnder(dir); len(left) > 0 {
			return fmt.Errorf("still running: %v", left)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTeardownRunsWhenATestPanics(t *testing.T) {
	cmd, dir := startHelper(t, "panic")
	if err := cmd.Wait(); err == nil {
		t.Fatal("the panicking helper exited 0")
	}
	waitGone(t, dir)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("t.Cleanup did not remove %s after the panic (stat: %v)", dir, err)
	}
}

func TestNothingOutlivesAKilledTestBinary(t *testing.T) {
	cmd, dir := startHelper(t, "hang")
	want, what := 10, "etcd + kube-apiserver + kube-controller-manager + kueue for 2 clusters, kube-scheduler + kwok on the worker"
	if n := len(local.ProcessesUnder(dir)); n != want {
		t.Errorf("want %s (%d processes), found %d", what, want, n)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, dir) // Pdeathsig ended them with their parent
	if removed := local.RemoveStaleDirs(); !slices.Contains(removed, dir) {
		t.Fatalf("RemoveStaleDirs did not remove the killed binary's %s (removed %v)", dir, removed)
	}
}
