// Package caps reads the host's capability bounding set and filters OCI
// runtime spec files down to it (for cmd/mktk-runc and the kind probe).
package caps

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// capNames are the kernel's capabilities by number (linux/capability.h).
func capNames() [41]string {
	return [...]string{
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
		"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
		"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
		"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
		"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
		"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
		"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
		"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
		"CAP_CHECKPOINT_RESTORE",
	}
}

// Set is a capability set as the kernel prints it in /proc/<pid>/status.
type Set uint64

// Has reports whether the named capability ("CAP_SYS_ADMIN") is in s; a
// name this package does not know is reported as absent.
func (s Set) Has(name string) bool {
	for i, n := range capNames() {
		if n == name {
			return s&(1<<uint(i)) != 0
		}
	}
	return false
}

// Missing lists the capabilities the kernel knows (up to CAP_LAST_CAP,
// read from /proc/sys/kernel/cap_last_cap by the caller as last) that s
// lacks.
func (s Set) Missing(last int) []string {
	var out []string
	names := capNames()
	for i := 0; i <= last && i < len(names); i++ {
		if s&(1<<uint(i)) == 0 {
			out = append(out, names[i])
		}
	}
	return out
}

// Parse reads the CapBnd line of a /proc/<pid>/status text.
func Parse(status string) (Set, error) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapBnd:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("caps: CapBnd %q: %w", strings.TrimSpace(v), err)
			}
			return Set(n), nil
		}
	}
	return 0, fmt.Errorf("caps: no CapBnd line")
}

// Bounding is this process's capability bounding set.
func Bounding() (Set, error) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	return Parse(string(raw))
}

// LastCap is the kernel's highest capability number.
func LastCap() (int, error) {
	raw, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(raw)))
}

// SpecFile is an OCI file a runc command line reads: a bundle's config.json
// or an exec's process file.
type SpecFile struct {
	Path string
	// Process is true for a process file (capabilities at the top level),
	// false for a bundle config (under "process").
	Process bool
}

// SpecFiles finds, in runc's arguments, the files whose capabilities the
// command applies: `create`/`run` read <bundle>/config.json (--bundle or
// -b, else the working directory), `exec` reads --process or -p when given.
func SpecFiles(args []string) []SpecFile {
	cmd := ""
	var bundle, process string
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--bundle" || a == "-b":
			bundle = next()
		case strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		case a == "--process" || a == "-p":
			process = next()
		case strings.HasPrefix(a, "--process="):
			process = strings.TrimPrefix(a, "--process=")
		case cmd == "" && !strings.HasPrefix(a, "-"):
			cmd = a
		case cmd == "" && (a == "--root" || a == "--log" || a == "--log-format" || a == "--criu" || a == "--rootless"):
			next() // a global flag's value is not the command
		}
	}
	switch cmd {
	case "create", "run":
		if bundle == "" {
			bundle = "."
		}
		return []SpecFile{{Path: filepath.Join(bundle, "config.json")}}
	case "exec":
		if process != "" {
			return []SpecFile{{Path: process, Process: true}}
		}
	}
	return nil
}

// FilterFile removes from the spec file at path every capability not in
// keep, rewriting the file only when something was removed. Every other
// field is kept as it was read.
func FilterFile(path string, process bool, keep Set) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, changed, err := Filter(raw, process, keep)
	if err != nil {
		return fmt.Errorf("caps: %s: %w", path, err)
	}
	if !changed {
		return nil
	}
	return os.WriteFile(path, out, 0o600)
}

// Filter is FilterFile on the file's bytes.
func Filter(raw []byte, process bool, keep Set) ([]byte, bool, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, false, err
	}
	proc := doc
	if !process {
		p, ok := doc["process"]
		if !ok {
			return raw, false, nil
		}
		proc = nil // a map of its own, not doc's
		if err := json.Unmarshal(p, &proc); err != nil {
			return nil, false, fmt.Errorf("process: %w", err)
		}
	}
	c, ok := proc["capabilities"]
	if !ok {
		return raw, false, nil
	}
	var sets map[string][]string
	if err := json.Unmarshal(c, &sets); err != nil {
		return nil, false, fmt.Errorf("capabilities: %w", err)
	}
	changed := false
	var err error
	for k, list := range sets {
		kept := list[:0:0]
		for _, name := range list {
			if known(name) && !keep.Has(name) {
				changed = true
				continue
			}
			kept = append(kept, name)
		}
		sets[k] = kept
	}
	if !changed {
		return raw, false, nil
	}
	if proc["capabilities"], err = json.Marshal(sets); err != nil {
		return nil, false, err
	}
	if !process {
		if doc["process"], err = json.Marshal(proc); err != nil {
			return nil, false, err
		}
	}
	out, err := json.Marshal(doc)
	return out, true, err
}

func known(name string) bool {
	for _, n := range capNames() {
		if n == name {
			return true
		}
	}
	return false
}
