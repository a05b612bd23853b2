package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/internal/poll"
)

// binary builds mktk once per test binary, into a directory removed at the
// end (TestMain).
type binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func (b *binary) get(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "mktk-test-bin-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "mktk")
		start := time.Now()
		out, err := exec.Command("go", "build", "-o", b.path, ".").CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
		t.Logf("built mktk in %s", time.Since(start).Round(time.Millisecond))
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// theBinary is built by the first test that needs it, removed by TestMain.
var theBinary = &binary{}

func TestMain(m *testing.M) {
	code := m.Run()
	if theBinary.dir != "" {
		os.RemoveAll(theBinary.dir)
	}
	os.Exit(code)
}

// lineReader collects a process's output lines and lets a test wait for one.
type lineReader struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func readLines(r io.Reader, echo func(string)) *lineReader {
	lr := &lineReader{done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lr.mu.Lock()
			lr.lines = append(lr.lines, sc.Text())
			lr.mu.Unlock()
			if echo != nil {
				echo(sc.Text())
			}
		}
	}()
	return lr
}

// waitFor waits until a line has prefix and returns it.
func (lr *lineReader) waitFor(ctx context.Context, timeout time.Duration, prefix string) (string, error) {
	var found string
	err := poll.Until(ctx, timeout, fmt.Sprintf("a line starting with %q", prefix), func(context.Context) error {
		lr.mu.Lock()
		defer lr.mu.Unlock()
		for _, l := range lr.lines {
			if strings.HasPrefix(l, prefix) {
				found = l
				return nil
			}
		}
		select {
		case <-lr.done:
			return poll.Stop(fmt.Errorf("output ended; got:\n%s", strings.Join(lr.lines, "\n")))
		default:
		}
		return fmt.Errorf("%d lines so far", len(lr.lines))
	})
	return found, err
}

func (lr *lineReader) all() []string {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return append([]string(nil), lr.lines...)
}

// descendants returns the PIDs and command names of pid's descendants.
func descendants(pid int) map[int]string {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	name := map[int]string{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		lp, rp := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if lp < 0 || rp < 0 {
			continue
		}
		f := strings.Fields(s[rp+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p], name[p] = pp, s[lp+1:rp]
	}
	out := map[int]string{}
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out[p] = name[p]
				break
			}
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
