package local

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one child process (etcd or kube-apiserver). It runs in its own
// process group and dies with the test binary: Pdeathsig sends SIGKILL when
// the parent exits, even when the test binary itself is killed.
type process struct {
	name    string // "etcd" or "kube-apiserver"
	cluster string // "" for a process the topology's clusters share
	path    string
	args    []string
	// env is added to this process's environment (later entries win).
	env []string
	// dir is the working directory; "" inherits the test process's.
	dir     string
	logPath string
	// hostname, when set, runs the process in a UTS namespace of its own
	// with that host name, as a pod's containers get the pod's name (see
	// withHostname).
	hostname string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// owner names whose process it is in errors: `cluster "w1"`, or the
// topology for a process its clusters share.
func (p *process) owner() string {
	if p.cluster == "" {
		return "topology"
	}
	return fmt.Sprintf("cluster %q", p.cluster)
}

func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.exitedLocked() {
		return fmt.Errorf("%s: %s is already running (pid %d)", p.owner(), p.name, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Dir = p.dir
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if p.hostname != "" {
		withHostname(cmd, p.hostname)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		if p.hostname != "" {
			return fmt.Errorf("%s: start %s (%s) in a UTS namespace of its own with host name %q (it gives each Kueue replica its pod's host name, which starts its leader Lease identity); this machine refused: %w",
				p.owner(), p.name, p.path, p.hostname, err)
		}
		return fmt.Errorf("%s: start %s (%s): %w", p.owner(), p.name, p.path, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// exited reports whether the process has ended, and why.
func (p *process) exited() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitedLocked(), p.waitErr
}

func (p *process) exitedLocked() bool {
	if p.done == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// current is the running command and its exit channel; nil when the
// process was never started.
func (p *process) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return nil, nil
	}
	return p.cmd, p.done
}

// stop kills the whole process group and waits for the exit. SIGKILL is
// deliberate: these are disposable test servers, and a graceful API server
// shutdown takes seconds.
func (p *process) stop(timeout time.Duration) error {
	cmd, done := p.current()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s: %s (pid %d) did not exit within %s after SIGKILL", p.owner(), p.name, cmd.Process.Pid, timeout)
	}
}

// terminate sends SIGTERM, as the kubelet does to a deleted pod's
// containers, waits up to grace for the exit, then SIGKILLs.
func (p *process) terminate(grace time.Duration) error {
	cmd, done := p.current()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		return p.stop(procStopTimeout)
	}
}

// withHostname makes cmd run in a new UTS namespace (and, for a user other
// than root, a user namespace mapping it to root there, which owns the UTS
// namespace) whose host name /bin/sh sets before it execs the program: the
// process keeps cmd's pid, arguments and environment. Go's os.Hostname,
// which controller-runtime's leader election puts first in its Lease
// holder identity, then returns name.
func withHostname(cmd *exec.Cmd, name string) {
	script := `{ echo "$0" > /proc/sys/kernel/hostname || hostname "$0"; } && exec "$@"`
	cmd.Args = append([]string{"/bin/sh", "-c", script, name, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	cmd.Err = nil
	attr := cmd.SysProcAttr
	attr.Cloneflags |= syscall.CLONE_NEWUTS
	if uid := os.Geteuid(); uid != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
}

// logTail returns the last lines of the process log, for error messages.
func (p *process) logTail(lines int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	b = bytes.TrimRight(b, "\n")
	all := strings.Split(string(b), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// portPool hands out free loopback ports and never the same one twice. The
// clusters of a topology start at once, and a port given to one of them but
// not yet bound is free to the kernel, which may give it again. A nil pool
// asks the kernel only.
type portPool struct {
	mu    sync.Mutex
	given map[int]bool
}

func (pp *portPool) free() (int, error) {
	if pp == nil {
		return freePort()
	}
	for range 100 {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		pp.mu.Lock()
		if !pp.given[port] {
			if pp.given == nil {
				pp.given = map[int]bool{}
			}
			pp.given[port] = true
			pp.mu.Unlock()
			return port, nil
		}
		pp.mu.Unlock()
	}
	return 0, errors.New("no free loopback port that this topology has not given out already")
}

// freePort asks the kernel for an unused loopback port. Another process may
// take it before we bind it; callers retry a start that fails to bind.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
