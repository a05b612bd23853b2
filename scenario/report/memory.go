package report

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// proc is one process of this process's tree.
type proc struct {
	pid     int
	rss     int64
	cmdline string
}

// processTree returns this process and all its descendants, from /proc
// (Linux). Elsewhere it returns nil.
func processTree() []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []proc
	queue := []int{os.Getpid()}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		rss, ok := rssOf(pid)
		if !ok {
			continue // gone meanwhile
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		out = append(out, proc{pid: pid, rss: rss, cmdline: string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))})
		queue = append(queue, children[pid]...)
	}
	return out
}

// parentOf reads the parent PID from /proc/<pid>/stat.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	// The command name is in parentheses and may hold spaces: fields
	// after the last ')' are "state ppid ...".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// rssOf returns the memory pid uses (bytes): its proportional set size
// (Pss in /proc/<pid>/smaps_rollup: pages shared with other processes, such
// as the text of 20 kube-apiservers from one binary, count in part), or
// VmRSS where smaps_rollup is missing.
func rssOf(pid int) (int64, bool) {
	if v, ok := procField(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"), "Pss:"); ok {
		return v, true
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
		return 0, false
	}
	v, _ := procField(filepath.Join("/proc", strconv.Itoa(pid), "status"), "VmRSS:")
	return v, true // a zombie has neither
}

// procField reads a "Key: <n> kB" line of a /proc file, in bytes.
func procField(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			if fs := strings.Fields(v); len(fs) >= 1 {
				kb, err := strconv.ParseInt(fs[0], 10, 64)
				return kb * 1024, err == nil
			}
		}
	}
	return 0, false
}

// TreeMemory is the memory (bytes, proportional set size) of this process
// and every process it started, directly or not. 0 where /proc is missing.
func TreeMemory() int64 {
	var sum int64
	for _, p := range processTree() {
		sum += p.rss
	}
	return sum
}

// MemoryUnder is the memory (bytes, proportional set size) of this
// process's descendants whose command line names a path under dir: all of a
// local topology's processes (Provider.Dir()), including an etcd its
// clusters share, which MemoryByCluster gives to none of them.
func MemoryUnder(dir string) int64 {
	var sum int64
	if dir == "" {
		return 0
	}
	self := os.Getpid()
	for _, p := range processTree() {
		if p.pid != self && strings.Contains(p.cmdline, dir+string(filepath.Separator)) {
			sum += p.rss
		}
	}
	return sum
}

// MemoryByCluster attributes the memory (proportional set size) of this
// process's descendants to clusters: a process belongs to cluster c when its command
// line names a path under dir/c/ (the local provider keeps each cluster's
// files in Provider.Dir()/<cluster>). Clusters without processes are absent.
// An etcd the clusters share (local.EtcdShared) is no cluster's.
func MemoryByCluster(dir string, clusters []string) map[string]int64 {
	out := map[string]int64{}
	if dir == "" {
		return out
	}
	self := os.Getpid()
	for _, p := range processTree() {
		if p.pid == self {
			continue
		}
		for _, c := range clusters {
			if strings.Contains(p.cmdline, filepath.Join(dir, c)+string(filepath.Separator)) {
				out[c] += p.rss
				break
			}
		}
	}
	return out
}
