package local

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// ProcessesUnder returns the ids of running processes whose command line
// mentions dir. After Close, ProcessesUnder(provider.Dir()) must be empty:
// every etcd and kube-apiserver of a topology has its data, certificates and
// logs below that directory. Linux only (it reads /proc).
func ProcessesUnder(dir string) []int {
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmd, []byte(dir)) {
			// A zombie has an empty cmdline, so anything matching is alive.
			out = append(out, pid)
		}
	}
	return out
}
