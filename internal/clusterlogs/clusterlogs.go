// Package clusterlogs reads the controller logs of a topology's clusters
// for failure reports: from the provider's files where it keeps them
// (topology.ClusterDirs: the local topology), else through pods/log of the
// pods in Kueue's namespace, as on any real cluster. What it returns is not
// yet redacted: the caller redacts before writing.
package clusterlogs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/multikueue-testkit/testkit/topology"
)

// Log is the tail of one log of a cluster.
type Log struct {
	// Name is the file name it is written as: "kueue.log" for a file,
	// "pod-<pod>-<container>.log" for a pod.
	Name string
	Text string
}

// Files returns the log file names read from a cluster's directory, in
// order: every "*.log" there but the audit log (observe reads that).
func Files(dir string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range matches {
		if b := filepath.Base(m); b != "audit.log" {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Collect returns the last lines of cluster c's logs: the provider's files
// when it keeps them (ClusterDirs), else each container's log of the pods in
// namespace (Kueue's; its controller, and on a real cluster also the
// operators' when they share it). A log that could not be read is an error
// naming the cluster and the log, joined; the others are still returned.
func Collect(ctx context.Context, topo *topology.Topology, c *topology.Cluster, namespace string, lines int) ([]Log, error) {
	if cd, ok := topo.Provider().(topology.ClusterDirs); ok && cd.Dir() != "" {
		return fromFiles(filepath.Join(cd.Dir(), c.Name), c.Name, lines)
	}
	return fromPods(ctx, c, namespace, lines)
}

func fromFiles(dir, cluster string, lines int) ([]Log, error) {
	names, err := Files(dir)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: logs in %s: %w", cluster, dir, err)
	}
	var out []Log
	var errs []error
	for _, n := range names {
		text, err := Tail(filepath.Join(dir, n), lines)
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: %s: %w", cluster, n, err))
			continue
		}
		out = append(out, Log{Name: n, Text: text})
	}
	return out, errors.Join(errs...)
}

func fromPods(ctx context.Context, c *topology.Cluster, namespace string, lines int) ([]Log, error) {
	if c.Config == nil {
		return nil, fmt.Errorf("cluster %q: no rest.Config to read pods/log with", c.Name)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: list pods in %s: %w", c.Name, namespace, err)
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("cluster %q: no pods in %s to read logs of (Kueue runs elsewhere, or the provider keeps its logs where this cannot read them)", c.Name, namespace)
	}
	var out []Log
	var errs []error
	for _, p := range pods.Items {
		for _, ctr := range p.Spec.Containers {
			raw, err := cs.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, TailLines: ptr.To(int64(lines))}).DoRaw(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("cluster %q: pods/log %s/%s container %s: %w", c.Name, namespace, p.Name, ctr.Name, err))
				continue
			}
			out = append(out, Log{Name: fmt.Sprintf("pod-%s-%s.log", p.Name, ctr.Name), Text: string(bytes.TrimRight(raw, "\n")) + "\n"})
		}
	}
	return out, errors.Join(errs...)
}

// Tail returns the last n lines of the file at path, reading at most its
// last 4 MiB.
func Tail(path string, n int) (string, error) {
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
