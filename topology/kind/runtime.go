package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/cluster"
)

// EnvKindProvider is the variable the kind CLI reads to choose its node
// provider ("docker", "podman", "nerdctl"); Detect honours it as the CLI
// does when no runtime is given.
const EnvKindProvider = "KIND_EXPERIMENTAL_PROVIDER"

// Runtime is the container runtime kind drives here.
type Runtime struct {
	// Name is RuntimeDocker, RuntimePodman or RuntimeNerdctl.
	Name string
	// CLI is the path of its command-line tool, used to save local images
	// for loading into the nodes and to check that the daemon answers.
	CLI string
	// Version is the CLI's `<cli> -v` line.
	Version string

	option cluster.ProviderOption
}

func (r Runtime) String() string { return r.Name + " (" + r.CLI + ")" }

// daemonTimeout bounds `<cli> info`.
const daemonTimeout = 20 * time.Second

// Detect finds the container runtime kind will use and checks that its
// daemon answers. name is RuntimeDocker, RuntimePodman, RuntimeNerdctl, or
// "" to use $KIND_EXPERIMENTAL_PROVIDER, else kind's own detection
// (cluster.DetectNodeProvider, which tries `docker -v`, `nerdctl -v`,
// `podman -v` in that order). The error says what was looked for and what
// was missing: no CLI on PATH, or a CLI whose daemon does not answer
// `<cli> info`. Tests use it to skip when there is no runtime.
func Detect(ctx context.Context, name string) (Runtime, error) {
	if name == "" {
		name = strings.TrimSpace(os.Getenv(EnvKindProvider))
	}
	var rt Runtime
	switch name {
	case "":
		opt, err := cluster.DetectNodeProvider()
		if err != nil {
			return Runtime{}, fmt.Errorf("kind: no container runtime: kind's provider detection ran `docker -v`, `nerdctl -v` and `podman -v` on PATH and none answered as expected: %v", err)
		}
		// kind does not say which one it found: ask the CLIs in its order.
		for _, n := range runtimes() {
			if r, err := probeCLI(ctx, n); err == nil {
				rt = r
				break
			}
		}
		if rt.Name == "" {
			return Runtime{}, errors.New("kind: kind's provider detection found a runtime, but none of docker, nerdctl, podman answered `-v` here")
		}
		rt.option = opt
	case RuntimeDocker, RuntimePodman, RuntimeNerdctl:
		r, err := probeCLI(ctx, name)
		if err != nil {
			return Runtime{}, fmt.Errorf("kind: runtime %s: %w", name, err)
		}
		rt = r
	default:
		return Runtime{}, fmt.Errorf("kind: runtime %q (Options.Runtime or $%s): use %q, %q or %q", name, EnvKindProvider, RuntimeDocker, RuntimePodman, RuntimeNerdctl)
	}
	if rt.option == nil {
		switch rt.Name {
		case RuntimeDocker:
			rt.option = cluster.ProviderWithDocker()
		case RuntimePodman:
			rt.option = cluster.ProviderWithPodman()
		case RuntimeNerdctl:
			rt.option = cluster.ProviderWithNerdctl("")
		}
	}
	ictx, cancel := context.WithTimeout(ctx, daemonTimeout)
	defer cancel()
	out, err := exec.CommandContext(ictx, rt.CLI, "info").CombinedOutput()
	if err != nil {
		return Runtime{}, fmt.Errorf("kind: %s found (%s), but its daemon does not answer `%s info` within %s: %v: %s", rt.Name, rt.Version, rt.Name, daemonTimeout, err, lastLine(out))
	}
	return rt, nil
}

// versionPrefix is how each CLI's `-v` line starts, as kind checks it.
func versionPrefix(name string) string {
	switch name {
	case RuntimePodman:
		return "podman version"
	case RuntimeNerdctl:
		return "nerdctl version"
	}
	return "Docker version"
}

// probeCLI finds name on PATH and checks its `-v` line as kind does.
func probeCLI(ctx context.Context, name string) (Runtime, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return Runtime{}, fmt.Errorf("%s is not on PATH", name)
	}
	vctx, cancel := context.WithTimeout(ctx, daemonTimeout)
	defer cancel()
	out, err := exec.CommandContext(vctx, path, "-v").Output()
	if err != nil {
		return Runtime{}, fmt.Errorf("`%s -v`: %v", path, err)
	}
	line := strings.TrimSpace(string(out))
	if !strings.HasPrefix(line, versionPrefix(name)) {
		return Runtime{}, fmt.Errorf("`%s -v` printed %q, not %q...", path, firstLine(line), versionPrefix(name))
	}
	return Runtime{Name: name, CLI: path, Version: firstLine(line)}, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// inotifyPerNode is how many inotify instances one kind node holds once
// Kueue runs on it: 27 counted on each node of a 1 + 3 topology here
// (systemd, containerd, kubelet, the control plane, CoreDNS, Kueue), plus a
// margin. The nodes' processes count against the limit of the user they
// run as (root on a rootful engine), which Linux sets to 128 by default:
// four nodes take most of it.
const inotifyPerNode = 30

// nodesUID is the host user the node containers' processes run as: root on
// a rootful engine, this user on a rootless one; false when the runtime
// does not say.
func nodesUID(ctx context.Context, rt Runtime) (uint32, bool) {
	var args []string
	switch rt.Name {
	case RuntimeDocker:
		args = []string{"info", "--format", "{{json .SecurityOptions}}"}
	case RuntimePodman:
		args = []string{"info", "--format", "{{.Host.Security.Rootless}}"}
	default:
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, daemonTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, rt.CLI, args...).Output()
	if err != nil {
		return 0, false
	}
	if s := string(out); strings.Contains(s, "rootless") || strings.TrimSpace(s) == "true" {
		return uint32(os.Getuid()), true
	}
	return 0, true
}
