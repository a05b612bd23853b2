package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/multikueue-testkit/testkit/internal/clusterlogs"
	"github.com/multikueue-testkit/testkit/internal/redact"
	"github.com/multikueue-testkit/testkit/topology"
)

// LogFileNames returns the names of the log files CopyLogs copies from each
// cluster's directory: Kueue's and the API server's.
func LogFileNames() []string { return []string{"kueue.log", "kube-apiserver.log"} }

// DefaultLogLines is how many last lines of each log CopyLogs keeps.
const DefaultLogLines = 300

// CopyLogs copies the last lines of each cluster's Kueue log and API server
// log to dst/<cluster>/<file>, redacted (tokens, PEM blocks, kubeconfig
// credentials). It must run before the topology is closed (Close removes
// the files). Providers without per-cluster directories (topology.ClusterDirs) have
// nothing to copy: it says so in the error. It returns the files written.
func CopyLogs(topo *topology.Topology, dst string, lines int) ([]string, error) {
	if lines <= 0 {
		lines = DefaultLogLines
	}
	cd, ok := topo.Provider().(topology.ClusterDirs)
	if !ok || cd.Dir() == "" {
		return nil, fmt.Errorf("provider %s keeps no cluster logs this report can copy", topo.ProviderName)
	}
	var written []string
	var errs []error
	for _, c := range topo.Clusters() {
		for _, name := range LogFileNames() {
			src := filepath.Join(cd.Dir(), c.Name, name)
			tail, err := clusterlogs.Tail(src, lines)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("cluster %q: %s: %w", c.Name, name, err))
				continue
			}
			out := filepath.Join(dst, safeName(c.Name), name)
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return written, err
			}
			if err := os.WriteFile(out, []byte(redact.String(tail)), 0o644); err != nil {
				return written, err
			}
			written = append(written, out)
		}
	}
	return written, errors.Join(errs...)
}
