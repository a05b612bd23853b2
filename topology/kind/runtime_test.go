package kind

import (
	"context"
	"strings"
	"testing"
)

func TestDetectSaysWhatWasLookedFor(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(EnvKindProvider, "")
	ctx := context.Background()
	_, err := Detect(ctx, "")
	if err == nil {
		t.Fatal("a runtime was detected on an empty PATH")
	}
	for _, want := range []string{"no container runtime", "docker -v", "nerdctl -v", "podman -v"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := Detect(ctx, RuntimePodman); err == nil || !strings.Contains(err.Error(), "podman is not on PATH") {
		t.Errorf("Detect(podman): %v", err)
	}
	if _, err := Detect(ctx, "lxc"); err == nil || !strings.Contains(err.Error(), "Options.Runtime") || !strings.Contains(err.Error(), EnvKindProvider) {
		t.Errorf("Detect(lxc): %v", err)
	}
	// The kind CLI's variable picks the runtime when none is given.
	t.Setenv(EnvKindProvider, RuntimeNerdctl)
	if _, err := Detect(ctx, ""); err == nil || !strings.Contains(err.Error(), "nerdctl is not on PATH") {
		t.Errorf("Detect with %s=nerdctl: %v", EnvKindProvider, err)
	}
}

func TestDetectDockerWithoutDaemon(t *testing.T) {
	log := fakeDocker(t, "absent")
	_, err := Detect(context.Background(), "")
	if err == nil {
		t.Fatal("a CLI without a daemon was accepted")
	}
	for _, want := range []string{"docker found (Docker version 27.3.1", "daemon does not answer `docker info`", "Cannot connect to the Docker daemon"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if c := calls(t, log); len(c) < 2 || c[len(c)-1] != "info" {
		t.Errorf("calls %q: want kind's `docker -v` then `docker info`", c)
	}
}

func TestDetectDockerWithDaemon(t *testing.T) {
	fakeDocker(t, "no-kind")
	for _, name := range []string{"", RuntimeDocker} {
		rt, err := Detect(context.Background(), name)
		if err != nil {
			t.Fatalf("Detect(%q): %v", name, err)
		}
		if rt.Name != RuntimeDocker || !strings.HasSuffix(rt.CLI, "/docker") || rt.option == nil {
			t.Errorf("Detect(%q) = %+v", name, rt)
		}
	}
}
