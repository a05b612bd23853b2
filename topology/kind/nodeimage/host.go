package nodeimage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/multikueue-testkit/testkit/internal/poll"
)

// ShimRuntime is the name the mktk-runc shim is registered under in the
// Docker daemon's configuration.
const ShimRuntime = "mktk-runc"

// DefaultDaemonConfig is the Docker daemon's configuration file.
const DefaultDaemonConfig = "/etc/docker/daemon.json"

// shimPackage is the shim's main package (cmd/mktk-runc of this module).
const shimPackage = "github.com/multikueue-testkit/testkit/cmd/mktk-runc"

// EnsureShim builds the mktk-runc shim, static, into the cache
// (<cache>/mktk-runc/mktk-runc) and returns its path. It runs `go build`
// in the working directory, which must be inside a module that has the
// testkit (the testkit itself, or a module that requires it).
func EnsureShim(ctx context.Context, o Options) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(o.CacheDir, "mktk-runc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "mktk-runc")
	tmp := out + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp, shimPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("nodeimage: go build %s (from a module that requires the testkit): %v: %s", shimPackage, err, tail(string(b)))
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

// backupPath keeps the daemon configuration as it was before EnableShim.
func backupPath(config string) string { return config + ".mktk-orig" }

// EnableShim makes the shim the Docker daemon's default runtime: it writes
// config (default DefaultDaemonConfig) with a "runtimes" entry for
// ShimRuntime and "default-runtime", keeping the original byte for byte
// beside it (config + ".mktk-orig"), signals dockerd to reload (SIGHUP:
// both keys reload live; running containers keep their runtime) and waits
// until `docker info` says the default changed. kind passes no --runtime
// to docker, so the default is the only way its node containers get the
// shim. DisableShim undoes it.
func EnableShim(ctx context.Context, o Options, config string) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	if config == "" {
		config = DefaultDaemonConfig
	}
	shim, err := EnsureShim(ctx, o)
	if err != nil {
		return err
	}
	if err := writeShimConfig(config, shim); err != nil {
		return err
	}
	o.logf("%s: default runtime %s (%s); reloading dockerd", config, ShimRuntime, shim)
	return reload(ctx, o, func(e Engine) bool { return e.DefaultRuntime == ShimRuntime })
}

// DisableShim restores the daemon configuration EnableShim kept (without a
// kept copy it removes the shim's keys) and reloads dockerd. dockerd's
// reload applies only the keys a file sets, so the restored file alone
// would leave the shim the default: it first reloads a copy that names the
// original default runtime (runc when it named none), waits for it, then
// writes the original back. The shim stays registered in the running
// daemon (not its default) until dockerd restarts.
func DisableShim(ctx context.Context, o Options, config string) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	if config == "" {
		config = DefaultDaemonConfig
	}
	if err := restoreConfig(config); err != nil {
		return err
	}
	orig, err := os.ReadFile(config)
	if err != nil {
		return fmt.Errorf("nodeimage: %s: %w", config, err)
	}
	transient, def, err := withDefaultRuntime(orig)
	if err != nil {
		return fmt.Errorf("nodeimage: %s: %w", config, err)
	}
	if err := os.WriteFile(config, transient, 0o644); err != nil {
		return fmt.Errorf("nodeimage: %s: %w", config, err)
	}
	o.logf("%s restored; reloading dockerd with default runtime %s", config, def)
	err = reload(ctx, o, func(e Engine) bool { return e.DefaultRuntime == def })
	if werr := os.WriteFile(config, orig, 0o644); werr != nil && err == nil {
		err = fmt.Errorf("nodeimage: %s: %w", config, werr)
	}
	return err
}

// withDefaultRuntime is raw with "default-runtime" set to what it names,
// else "runc", and that runtime's name.
func withDefaultRuntime(raw []byte) ([]byte, string, error) {
	cfg := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, "", err
		}
	}
	def, _ := cfg["default-runtime"].(string)
	if def == "" || def == ShimRuntime {
		def = "runc"
	}
	cfg["default-runtime"] = def
	out, err := json.MarshalIndent(cfg, "", "  ")
	return out, def, err
}

// writeShimConfig keeps config as it is (once: a second enable keeps the
// first original) and writes it with the shim registered as the default.
func writeShimConfig(config, shim string) error {
	orig, err := os.ReadFile(config)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("nodeimage: %s: %w", config, err)
	}
	if _, err := os.Stat(backupPath(config)); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(backupPath(config), orig, 0o644); err != nil {
			return fmt.Errorf("nodeimage: keeping %s: %w", config, err)
		}
	}
	updated, err := withShim(orig, shim)
	if err != nil {
		return fmt.Errorf("nodeimage: %s: %w", config, err)
	}
	if err := os.WriteFile(config, updated, 0o644); err != nil {
		return fmt.Errorf("nodeimage: %s: %w", config, err)
	}
	return nil
}

// restoreConfig puts back what writeShimConfig kept; without a kept copy it
// removes the shim's keys.
func restoreConfig(config string) error {
	kept, err := os.ReadFile(backupPath(config))
	switch {
	case err == nil:
		if err := os.WriteFile(config, kept, 0o644); err != nil {
			return fmt.Errorf("nodeimage: restoring %s: %w", config, err)
		}
		return os.Remove(backupPath(config))
	case errors.Is(err, os.ErrNotExist):
		cur, err := os.ReadFile(config)
		if err != nil {
			return fmt.Errorf("nodeimage: %s: %w", config, err)
		}
		updated, err := withoutShim(cur)
		if err != nil {
			return fmt.Errorf("nodeimage: %s: %w", config, err)
		}
		if err := os.WriteFile(config, updated, 0o644); err != nil {
			return fmt.Errorf("nodeimage: %s: %w", config, err)
		}
		return nil
	default:
		return fmt.Errorf("nodeimage: %s: %w", backupPath(config), err)
	}
}

// withShim is the daemon configuration raw with the shim registered and
// made the default.
func withShim(raw []byte, shim string) ([]byte, error) {
	cfg := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, err
		}
	}
	rts, _ := cfg["runtimes"].(map[string]any)
	if rts == nil {
		rts = map[string]any{}
	}
	rts[ShimRuntime] = map[string]any{"path": shim}
	cfg["runtimes"] = rts
	cfg["default-runtime"] = ShimRuntime
	return json.MarshalIndent(cfg, "", "  ")
}

// withoutShim is raw without the shim's keys.
func withoutShim(raw []byte) ([]byte, error) {
	cfg := map[string]any{}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	if rts, ok := cfg["runtimes"].(map[string]any); ok {
		delete(rts, ShimRuntime)
		if len(rts) == 0 {
			delete(cfg, "runtimes")
		}
	}
	if cfg["default-runtime"] == ShimRuntime {
		delete(cfg, "default-runtime")
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// reload sends dockerd SIGHUP and waits (30 s) until done(engine info).
func reload(ctx context.Context, o Options, done func(Engine) bool) error {
	pid, err := dockerdPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("nodeimage: SIGHUP dockerd (pid %d): %w", pid, err)
	}
	var last Engine
	err = poll.UntilEvery(ctx, 30*time.Second, 200*time.Millisecond, "dockerd to take the new configuration (docker info's default runtime)", func(ctx context.Context) error {
		e, err := engineInfo(ctx, o.docker())
		if err != nil {
			return err
		}
		last = e
		if !done(e) {
			return fmt.Errorf("default runtime is %q", e.DefaultRuntime)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("nodeimage: after SIGHUP to dockerd (its log says why it kept %q): %w", last.DefaultRuntime, err)
	}
	return nil
}

// dockerdPID is dockerd's process: /var/run/docker.pid, else the first
// process named dockerd.
func dockerdPID() (int, error) {
	if raw, err := os.ReadFile("/var/run/docker.pid"); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
			return pid, nil
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == "dockerd" {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("nodeimage: no dockerd process found (is the Docker Engine local?)")
}
