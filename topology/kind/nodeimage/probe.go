package nodeimage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/multikueue-testkit/testkit/internal/caps"
	"github.com/multikueue-testkit/testkit/internal/poll"
)

// Engine is what `docker info` says of the engine.
type Engine struct {
	ServerVersion  string
	Storage        string
	CgroupDriver   string
	CgroupVersion  string
	Kernel         string
	OS             string
	DefaultRuntime string
	Runtimes       []string
}

// Check is one question the probe asked and what it saw.
type Check struct {
	Name string
	OK   bool
	// Saw is the answer: the output or the error, one line.
	Saw string
}

// Report is the probe's result.
type Report struct {
	Engine Engine
	// MissingCaps are the capabilities the engine's bounding set (PID 1's)
	// lacks; `docker run --privileged` asks runc for all of them.
	MissingCaps []string
	// Command is the node container's docker run line, as kind starts it.
	Command string
	Checks  []Check
	// CanRunKind: a node container started, systemd came up, containerd
	// ran, and a container ran inside it.
	CanRunKind bool
	// Runtime is the OCI runtime the node container that ran used.
	Runtime string
	// Notes say what a kind cluster here needs besides (the runtime shim,
	// kubelet's cgroup v1 switch).
	Notes []string
}

func (r *Report) check(name string, ok bool, saw string) bool {
	r.Checks = append(r.Checks, Check{Name: name, OK: ok, Saw: oneLine(saw)})
	return ok
}

// Markdown is the report as the README records it.
func (r Report) Markdown() string {
	var b strings.Builder
	e := r.Engine
	fmt.Fprintf(&b, "Engine: Docker %s, storage %s, cgroup driver %s, cgroup v%s, kernel %s, %s; default runtime %s (runtimes: %s).\n",
		e.ServerVersion, e.Storage, e.CgroupDriver, e.CgroupVersion, e.Kernel, e.OS, e.DefaultRuntime, strings.Join(e.Runtimes, ", "))
	if len(r.MissingCaps) > 0 {
		fmt.Fprintf(&b, "Capability bounding set of PID 1 lacks: %s.\n", strings.Join(r.MissingCaps, ", "))
	} else {
		b.WriteString("Capability bounding set of PID 1: complete.\n")
	}
	fmt.Fprintf(&b, "Node container started as kind starts it: `%s`\n\n", r.Command)
	b.WriteString("| check | result | saw |\n|---|---|---|\n")
	for _, c := range r.Checks {
		res := "ok"
		if !c.OK {
			res = "FAILED"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, res, strings.ReplaceAll(c.Saw, "|", `\|`))
	}
	if r.CanRunKind {
		fmt.Fprintf(&b, "\nVerdict: this engine can run kind's node containers (runtime %s).\n", r.Runtime)
	} else {
		b.WriteString("\nVerdict: this engine cannot run kind's node containers as it stands.\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

// nodeRunArgs are kind's node container flags (kind v0.33.0
// pkg/cluster/internal/providers/docker/provision.go, commonArgs and
// runArgsForNode), less the cluster labels and the port mappings.
func nodeRunArgs(name string) []string {
	return []string{
		"--detach", "--tty", "--hostname", name, "--name", name,
		"--privileged", "--cgroupns=private",
		"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--tmpfs", "/tmp", "--tmpfs", "/run",
		"--volume", "/var", "--volume", "/lib/modules:/lib/modules:ro",
		"--device", "/dev/fuse", "--init=false",
		"--label", "io.x-k8s.mktk.probe=true",
	}
}

// Probe asks whether this engine can run kind's node containers: it builds
// (or loads) the base image and the busybox image, starts a node container
// with kind's flags (with the default runtime, then with the mktk-runc shim
// when the engine has it registered), waits for systemd and containerd, and
// runs a busybox container inside it. The container and its volumes are
// removed before it returns. An error means the probe could not ask (no
// engine, no base image); a "no" is in the Report.
func Probe(ctx context.Context, o Options) (Report, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Report{}, err
	}
	d := o.docker()
	var r Report
	if r.Engine, err = engineInfo(ctx, d); err != nil {
		return r, err
	}
	if r.MissingCaps, err = missingCaps(); err != nil {
		r.Notes = append(r.Notes, "the capability bounding set could not be read: "+err.Error())
	}
	base, err := EnsureBase(ctx, o)
	if err != nil {
		return r, err
	}
	bb, err := EnsureBusybox(ctx, o)
	if err != nil {
		return r, err
	}
	name := fmt.Sprintf("mktk-probe-%d", os.Getpid())
	r.Command = "docker run " + strings.Join(nodeRunArgs(name), " ") + " " + base
	// Stock runc first, so the report shows whether the shim is needed.
	runtimes := []string{"runc"}
	if slices.Contains(r.Engine.Runtimes, ShimRuntime) {
		runtimes = append(runtimes, ShimRuntime)
	}
	started := false
	for _, rt := range runtimes {
		args := append(append([]string{"run"}, nodeRunArgs(name)...), "--runtime", rt, base)
		label := "privileged node container, runtime " + rt
		if _, err := d.run(ctx, nil, args...); err != nil {
			r.check(label, false, errorLine(err.Error()))
			removeContainer(d, name)
			continue
		}
		started = true
		r.Runtime = rt
		r.check(label, true, "started")
		break
	}
	if !started {
		r.Notes = append(r.Notes, fixNotes(r)...)
		return r, nil
	}
	defer removeContainer(d, name)
	ok := probeInside(ctx, d, name, bb, &r)
	r.CanRunKind = ok
	r.Notes = append(r.Notes, fixNotes(r)...)
	return r, nil
}

func probeInside(ctx context.Context, d docker, name, bb string, r *Report) bool {
	// "offline" until the entrypoint has exec'd systemd; --wait covers
	// "starting" only.
	var state string
	poll.UntilEvery(ctx, 2*time.Minute, time.Second, "systemd in the node container to finish booting (systemctl is-system-running)", func(ctx context.Context) error { //nolint:errcheck // the state says what was reached
		state, _ = d.run(ctx, nil, "exec", name, "systemctl", "is-system-running", "--wait")
		if state != "running" && state != "degraded" {
			return fmt.Errorf("systemd %s", state)
		}
		return nil
	})
	failed, _ := d.run(ctx, nil, "exec", name, "systemctl", "--failed", "--no-legend", "--plain")
	saw := "systemd " + state
	if units := unitNames(failed); len(units) > 0 {
		saw += "; failed units: " + strings.Join(units, ", ")
	}
	if !r.check("systemd as PID 1 (awaited: is-system-running, 2 min)", state == "running" || state == "degraded", saw) {
		return false
	}
	active, _ := d.run(ctx, nil, "exec", name, "systemctl", "is-active", "containerd")
	if !r.check("containerd inside the node", active == "active", "containerd "+active) {
		return false
	}
	fsType, _ := d.run(ctx, nil, "exec", name, "stat", "-fc", "%T", "/sys/fs/cgroup")
	v := "v1 (" + fsType + ")"
	if fsType == "cgroup2fs" {
		v = "v2"
	}
	r.check("cgroup hierarchy the node sees", true, v)
	if fsType != "cgroup2fs" {
		r.Notes = append(r.Notes, "the node sees cgroup "+v+": kubelet 1.35+ refuses cgroup v1 unless its configuration says failCgroupV1: false (the kind provider sets it through kind's kubeadm patches)")
	}
	var img bytes.Buffer
	if err := d.stream(ctx, &img, "save", bb); err != nil {
		return r.check("a container inside the node", false, err.Error())
	}
	if _, err := d.run(ctx, &img, "exec", "-i", name, "ctr", "-n", "k8s.io", "images", "import", "--all-platforms", "-"); err != nil {
		return r.check("a container inside the node", false, "ctr images import: "+err.Error())
	}
	out, err := d.run(ctx, nil, "exec", name, "ctr", "-n", "k8s.io", "run", "--rm", bb, "mktk-probe-nested", "/bin/echo", "nested-ok")
	if err != nil {
		return r.check("a container inside the node (ctr run busybox)", false, err.Error())
	}
	return r.check("a container inside the node (ctr run busybox)", strings.TrimSpace(out) == "nested-ok", out)
}

func fixNotes(r Report) []string {
	capsFailed := false
	for _, c := range r.Checks {
		if !c.OK && strings.Contains(c.Saw, "unable to apply caps") {
			capsFailed = true
		}
	}
	if !capsFailed {
		return nil
	}
	missing := strings.Join(r.MissingCaps, ", ")
	switch {
	case r.Runtime == ShimRuntime && r.Engine.DefaultRuntime == ShimRuntime:
		return []string{fmt.Sprintf("runc cannot grant %s, which --privileged asks for; the mktk-runc shim, the engine's default runtime (`mktk kind host enable`), drops what the host lacks, and kind runs unchanged", missing)}
	case r.Runtime == ShimRuntime:
		return []string{fmt.Sprintf("runc cannot grant %s, which --privileged asks for; the mktk-runc shim works, but kind passes no --runtime: make it the default with `mktk kind host enable` (as root; `mktk kind host disable` restores daemon.json)", missing)}
	case !slices.Contains(r.Engine.Runtimes, ShimRuntime):
		return []string{fmt.Sprintf("runc cannot grant %s, which --privileged asks for: register the mktk-runc shim with `mktk kind host enable` (as root) and probe again", missing)}
	}
	return nil
}

func engineInfo(ctx context.Context, d docker) (Engine, error) {
	out, err := d.run(ctx, nil, "info", "--format", "{{json .}}")
	if err != nil {
		return Engine{}, fmt.Errorf("nodeimage: no Docker Engine answers: %w", err)
	}
	return parseEngine([]byte(out))
}

func parseEngine(raw []byte) (Engine, error) {
	var info struct {
		ServerVersion   string
		Driver          string
		CgroupDriver    string
		CgroupVersion   string
		KernelVersion   string
		OperatingSystem string
		DefaultRuntime  string
		Runtimes        map[string]json.RawMessage
		ServerErrors    []string
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return Engine{}, fmt.Errorf("nodeimage: docker info: %w", err)
	}
	if info.ServerVersion == "" {
		return Engine{}, fmt.Errorf("nodeimage: no Docker Engine answers: %s", strings.Join(info.ServerErrors, "; "))
	}
	e := Engine{ServerVersion: info.ServerVersion, Storage: info.Driver, CgroupDriver: info.CgroupDriver, CgroupVersion: info.CgroupVersion,
		Kernel: info.KernelVersion, OS: info.OperatingSystem, DefaultRuntime: info.DefaultRuntime}
	for k := range info.Runtimes {
		e.Runtimes = append(e.Runtimes, k)
	}
	slices.Sort(e.Runtimes)
	return e, nil
}

// missingCaps are the capabilities PID 1's bounding set lacks, which no
// container on this host can get.
func missingCaps() ([]string, error) {
	raw, err := os.ReadFile("/proc/1/status")
	if err != nil {
		return nil, err
	}
	set, err := caps.Parse(string(raw))
	if err != nil {
		return nil, err
	}
	last, err := caps.LastCap()
	if err != nil {
		return nil, err
	}
	return set.Missing(last), nil
}

func removeContainer(d docker, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d.run(ctx, nil, "rm", "--force", "--volumes", name) //nolint:errcheck // absent is fine
}

func unitNames(list string) []string {
	var out []string
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// errorLine is the daemon's error in a docker CLI failure (docker adds a
// "See 'docker run --help'." line after it), else the last line.
func errorLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if i := strings.Index(l, "Error response from daemon"); i >= 0 {
			return strings.TrimSpace(l[i:])
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
