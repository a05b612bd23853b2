package existing_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/internal/clusterlogs"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testlog"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/scenario"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// A failed assertion on an attached topology leaves Kueue's controller log
// in the artifacts, read as on any real cluster: through pods/log of the
// pods in Kueue's namespace (an attached provider keeps no log files).
// The local manager has no Kueue pod (Kueue runs as a process), so the
// test makes one the way a kubelet would serve it: a KWOK server stands
// for the kubelet of a Node "localhost" (its Hostname address, which the
// API server dials), a Pod kueue-controller-manager-0 in Kueue's namespace
// is bound to it, and KWOK's Logs serve for its "manager" container the
// manager's real Kueue log (its last lines, in the CRI log format a
// kubelet reads). The API server proxies pods/log to KWOK for real.
func TestFailedAssertionLeavesKueueLogsFromPods(t *testing.T) {
	ctx := context.Background()
	p, mgr, workers := testtopo.BareProvider(ctx, t, topology.Options{Workers: 1, Connector: connect.KubeconfigSecret{}}, local.Options{})
	ns := "kueue-system"
	pod, served := servePodLog(ctx, t, mgr, ns, filepath.Join(p.Dir(), mgr.Name, "kueue.log"))

	o := existing.Options{Mode: existing.ModeWire, Manager: kubeconfigFile(t, "manager", mgr), Workers: []existing.Cluster{kubeconfigFile(t, workers[0].Name, workers[0])}}
	topo, err := existing.New(ctx, topology.Options{Progress: testlog.Writer(t), Connector: connect.KubeconfigSecret{}}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	})
	env, err := scenario.Observe(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	chk := *env.Check
	chk.Timeout = 2 * time.Second
	chk.Artifacts = t.TempDir()
	err = chk.ClusterActive(ctx, "no-such-worker")
	f, ok := err.(*assert.Failure)
	if !ok || f.Artifacts == "" {
		t.Fatalf("ClusterActive on a missing worker: %v; want a failure with artifacts", err)
	}
	got, rerr := os.ReadFile(filepath.Join(f.Artifacts, mgr.Name, "pod-"+pod+"-manager.log"))
	if rerr != nil {
		entries, _ := os.ReadDir(filepath.Join(f.Artifacts, mgr.Name))
		t.Fatalf("the manager's Kueue log from pods/log: %v (the artifacts hold %v)", rerr, entries)
	}
	lines := strings.Split(strings.TrimSpace(served), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(string(got), last) {
		t.Errorf("the log in the artifacts lacks the last line of Kueue's log as served (%q):\n%.500s", last, got)
	}
	t.Logf("artifacts: %s; the manager's Kueue log through pods/log: %d lines", f.Artifacts, strings.Count(string(got), "\n"))
	// The worker has no pod in Kueue's namespace: said, not dropped.
	why, err := os.ReadFile(filepath.Join(f.Artifacts, workers[0].Name, "logs-unread.txt"))
	if err != nil || !strings.Contains(string(why), "no pods in "+ns) {
		t.Errorf("the worker's logs-unread.txt: %q (err %v); want it to say there are no pods in %s", why, err, ns)
	}
}

// servePodLog makes cluster c serve, through pods/log, the last lines of
// logFile as the log of container "manager" of a Pod in namespace ns, and
// returns the Pod's name and the text served: a KWOK server as the kubelet of a Node named
// "localhost" (tainted, so nothing else lands there), the Pod bound to it.
func servePodLog(ctx context.Context, t *testing.T, c *topology.Cluster, ns, logFile string) (string, string) {
	t.Helper()
	const pod, node = "kueue-controller-manager-0", "localhost"
	dir := t.TempDir()
	text, err := clusterlogs.Tail(logFile, assert.LogLines)
	if err != nil {
		t.Fatal(err)
	}
	criLog := filepath.Join(dir, "manager.log")
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fmt.Fprintf(&b, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), sc.Text())
	}
	if err := os.WriteFile(criLog, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	op, err := assets.EnsureOperator(ctx, assets.Options{}, assets.KWOKController(), local.KWOKVersion)
	if err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	for _, rel := range []string{"kustomize/stage/node/fast/node-initialize.yaml", "kustomize/stage/pod/fast/pod-ready.yaml"} {
		raw, err := os.ReadFile(filepath.Join(op.SourceDir, rel))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Write(raw)
		cfg.WriteString("\n---\n")
	}
	fmt.Fprintf(&cfg, "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Logs\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  logs:\n  - containers: [manager]\n    logsFile: %s\n", pod, ns, criLog)
	cfgFile, kubeconfig := filepath.Join(dir, "kwok.yaml"), filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, c.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(op.Path, "--kubeconfig="+kubeconfig, "--config="+cfgFile,
		"--manage-nodes-with-annotation-selector=mktk-test/logs=true", "--node-lease-duration-seconds=0",
		fmt.Sprintf("--server-address=127.0.0.1:%d", port), fmt.Sprintf("--node-port=%d", port), "--node-ip=127.0.0.1")
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+dir, "HOME="+dir)
	logOut, err := os.Create(filepath.Join(dir, "kwok.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logOut, logOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logOut.Close()
	})

	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Annotations: map[string]string{"mktk-test/logs": "true", "kwok.x-k8s.io/node": "fake"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "mktk-test/logs", Effect: corev1.TaintEffectNoSchedule}}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.WithoutCancel(ctx), node, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("cluster %q: namespace %s: %v", c.Name, ns, err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "manager", Image: "kueue"}},
			Tolerations: []corev1.Toleration{{Key: "mktk-test/logs", Operator: corev1.TolerationOpExists}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(ns).Delete(context.WithoutCancel(ctx), pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})
	err = poll.Until(ctx, time.Minute, fmt.Sprintf("cluster %q: pods/log of %s/%s served by KWOK at 127.0.0.1:%d", c.Name, ns, pod, port), func(ctx context.Context) error {
		_, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "manager", TailLines: ptr.To(int64(1))}).DoRaw(ctx)
		return err
	})
	if err != nil {
		out, _ := os.ReadFile(filepath.Join(dir, "kwok.out"))
		t.Fatalf("%v\nKWOK's output:\n%.3000s", err, out)
	}
	return pod, text
}
