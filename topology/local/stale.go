package local

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	dirPattern   = "mktk-topology-"
	ownerPIDFile = "owner.pid"
)

// markOwner records this process as the owner of a topology directory.
func markOwner(root string) error {
	return os.WriteFile(filepath.Join(root, ownerPIDFile), []byte(strconv.Itoa(os.Getpid())), 0o600)
}

// RemoveStaleDirs deletes topology directories in the temp dir whose owning
// process is gone: what a test binary killed with SIGKILL could not clean (its
// etcd and kube-apiserver died with it, through Pdeathsig). Every Provision
// calls it; it returns what it removed.
func RemoveStaleDirs() []string {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPattern) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		raw, err := os.ReadFile(filepath.Join(dir, ownerPIDFile))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || alive(pid) {
			continue
		}
		if len(ProcessesUnder(dir)) > 0 {
			continue
		}
		if os.RemoveAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
