package kind

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDocker puts a docker CLI stand-in alone on PATH: it logs every
// invocation's arguments to the returned file and answers as a docker CLI
// whose daemon behaves as daemon says:
//
//   - "absent": `docker info` fails as the real CLI does without a daemon;
//   - "no-kind": `docker info` answers (Detect passes) but the JSON info
//     kind asks for fails, so kind's Create fails before creating anything;
//     `docker ps` lists no kind nodes;
//   - "has-manager": as "no-kind", but kind's List finds a cluster named
//     "mktk-manager" (made by someone else).
//
// `docker image inspect` knows the image "present/image:1" only, and
// `docker save -o FILE` writes a small file. It exercises the code around
// the runtime (detection, kind's own detection and create/delete paths,
// image save) where no daemon runs; it does not stand in for kind.
func fakeDocker(t *testing.T, daemon string) (logFile string) {
	t.Helper()
	dir := t.TempDir()
	logFile = filepath.Join(dir, "calls.log")
	script := `#!/bin/sh
echo "$*" >> '` + logFile + `'
case "$1" in
-v) echo "Docker version 27.3.1, build ce12230"; exit 0 ;;
info)
  if [ '` + daemon + `' = absent ]; then
    echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1
  fi
  if [ "$2" = "--format" ]; then echo "fake: no daemon for kind" >&2; exit 1; fi
  echo "Server Version: fake"; exit 0 ;;
ps)
  if [ '` + daemon + `' = has-manager ] && [ "$4" = label=io.x-k8s.kind.cluster ]; then echo mktk-manager; fi
  exit 0 ;;
image)
  if [ "$2" = inspect ] && [ "$5" = present/image:1 ]; then echo "sha256:0123"; exit 0; fi
  echo "Error: No such image: $5" >&2; exit 1 ;;
save) echo fake-archive > "$3"; exit 0 ;;
esac
echo "fake docker: unexpected: $*" >&2
exit 1
`
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// The go command stays reachable: topology/install finds the charts in
	// the module cache with it. Its directory holds no container CLI.
	path := dir
	if goBin, err := exec.LookPath("go"); err == nil {
		path += string(os.PathListSeparator) + filepath.Dir(goBin)
	}
	t.Setenv("PATH", path)
	t.Setenv(EnvKindProvider, "")
	return logFile
}

func calls(t *testing.T, logFile string) []string {
	t.Helper()
	raw, err := os.ReadFile(logFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

// keepGoEnv pins the go command's module cache, build cache and GOPATH to
// their current values, so that a test may change HOME.
func keepGoEnv(t *testing.T) {
	t.Helper()
	for _, v := range []string{"GOMODCACHE", "GOCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(v, strings.TrimSpace(string(out)))
	}
}
