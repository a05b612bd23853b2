package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

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
			tail, err := tailLines(src, lines)
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

// tailLines returns the last n lines of the file at path, reading at most
// its last 4 MiB.
func tailLines(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	const window = 4 << 20
	off := max(0, st.Size()-window)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	s := strings.TrimRight(string(b), "\n")
	ls := strings.Split(s, "\n")
	if off > 0 && len(ls) > 0 {
		ls = ls[1:] // a partial first line
	}
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n") + "\n", nil
}
