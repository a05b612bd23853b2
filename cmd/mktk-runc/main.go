// Command mktk-runc is an OCI runtime for Docker that drops, from every
// container it starts or execs into, the capabilities the host cannot grant,
// then runs runc.
//
// Why: kind starts its node containers with `docker run --privileged`, which
// asks runc for every capability the kernel knows. On a host whose own
// capability bounding set lacks one (seen here: a VM whose PID 1 has no
// CAP_SYS_RESOURCE), runc fails with "unable to apply caps: operation not
// permitted" and no kind cluster can start. Registered as the Docker
// daemon's default runtime (`mktk kind-host enable`), it lets kind run
// unchanged; a container still gets every capability the host has.
//
// It edits only the capability lists: the bundle's config.json on create and
// run (`--bundle`, or the working directory as runc defaults), the process
// file on exec (`--process`). Everything else goes to runc as given.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/multikueue-testkit/testkit/internal/caps"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mktk-runc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	bounding, err := caps.Bounding()
	if err != nil {
		return err
	}
	for _, f := range caps.SpecFiles(args) {
		if err := caps.FilterFile(f.Path, f.Process, bounding); err != nil {
			return err
		}
	}
	runc, err := findRunc()
	if err != nil {
		return err
	}
	return syscall.Exec(runc, append([]string{"runc"}, args...), os.Environ())
}

// findRunc is the real runc: $MKTK_RUNC, else the first runc on PATH (or in
// /usr/bin, /usr/sbin) that is not this program.
func findRunc() (string, error) {
	if p := os.Getenv("MKTK_RUNC"); p != "" {
		return p, nil
	}
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	dirs := filepath.SplitList(os.Getenv("PATH"))
	dirs = append(dirs, "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin")
	for _, d := range dirs {
		p := filepath.Join(d, "runc")
		if real, err := filepath.EvalSymlinks(p); err == nil && real != self {
			if _, err := exec.LookPath(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("no runc found on PATH, /usr/bin or /usr/sbin (set MKTK_RUNC)")
}
