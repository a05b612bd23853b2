package existing

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Environment variables that point a test at existing clusters instead of
// the local topology (see FromEnv). The bundled examples honour them.
const (
	// EnvKubeconfigs lists the clusters: "manager=PATH[:CONTEXT],NAME=PATH[:CONTEXT],..."
	// (the manager must be named "manager"), or a directory holding one
	// kubeconfig file per cluster, named after the cluster ("manager",
	// "worker-1.kubeconfig", ...).
	EnvKubeconfigs = "MKTK_KUBECONFIGS"
	// EnvAttachMode is "adopt" (default: MultiKueue is set up already; nothing
	// is created) or "wire" (set MultiKueue up with a connector).
	EnvAttachMode = "MKTK_ATTACH_MODE"
)

// ManagerName is the name EnvKubeconfigs gives the manager.
const ManagerName = "manager"

// FromEnv reads Options from EnvKubeconfigs and EnvAttachMode. ok is false,
// with no error, when EnvKubeconfigs is unset: run locally then.
func FromEnv() (o Options, ok bool, err error) {
	val := strings.TrimSpace(os.Getenv(EnvKubeconfigs))
	if val == "" {
		return Options{}, false, nil
	}
	mgr, workers, err := ParseKubeconfigs(val)
	if err != nil {
		return Options{}, true, err
	}
	mode := Mode(strings.TrimSpace(os.Getenv(EnvAttachMode)))
	switch mode {
	case "":
		mode = ModeAdopt
	case ModeAdopt, ModeWire:
	default:
		return Options{}, true, fmt.Errorf("existing: %s=%q: use %q or %q", EnvAttachMode, mode, ModeAdopt, ModeWire)
	}
	return Options{Manager: mgr, Workers: workers, Mode: mode}, true, nil
}

// ParseKubeconfigs reads the clusters of an EnvKubeconfigs value: a list of
// NAME=PATH[:CONTEXT], or a directory with one kubeconfig per cluster. The
// manager is the cluster named "manager"; the workers keep the list's order
// (a directory's are sorted by name).
func ParseKubeconfigs(value string) (manager Cluster, workers []Cluster, err error) {
	type entry struct{ name, path, context string }
	var entries []entry
	if st, statErr := os.Stat(value); statErr == nil && st.IsDir() {
		files, err := os.ReadDir(value)
		if err != nil {
			return Cluster{}, nil, fmt.Errorf("existing: %s: %w", EnvKubeconfigs, err)
		}
		for _, f := range files {
			if f.IsDir() || strings.HasPrefix(f.Name(), ".") {
				continue
			}
			name := f.Name()
			for _, ext := range []string{".kubeconfig", ".yaml", ".yml", ".conf"} {
				name = strings.TrimSuffix(name, ext)
			}
			entries = append(entries, entry{name: name, path: filepath.Join(value, f.Name())})
		}
		slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	} else {
		for i, item := range strings.Split(value, ",") {
			item = strings.TrimSpace(item)
			name, rest, found := strings.Cut(item, "=")
			if !found || name == "" || rest == "" {
				return Cluster{}, nil, fmt.Errorf("existing: %s: item %d %q: want NAME=PATH[:CONTEXT], or a directory of kubeconfig files", EnvKubeconfigs, i+1, item)
			}
			path, context, _ := strings.Cut(rest, ":")
			entries = append(entries, entry{name: name, path: path, context: context})
		}
	}
	seen := map[string]bool{}
	found := false
	for _, e := range entries {
		if seen[e.name] {
			return Cluster{}, nil, fmt.Errorf("existing: %s: cluster %q named twice", EnvKubeconfigs, e.name)
		}
		seen[e.name] = true
		c, err := Kubeconfig(e.name, e.path, e.context)
		if err != nil {
			return Cluster{}, nil, err
		}
		if e.name == ManagerName {
			manager, found = c, true
			continue
		}
		workers = append(workers, c)
	}
	if !found {
		return Cluster{}, nil, fmt.Errorf("existing: %s: no cluster named %q (the manager) among %d", EnvKubeconfigs, ManagerName, len(entries))
	}
	if len(workers) == 0 {
		return Cluster{}, nil, errors.New("existing: " + EnvKubeconfigs + ": no worker cluster besides the manager")
	}
	return manager, workers, nil
}
