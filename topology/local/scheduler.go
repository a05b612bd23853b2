package local

import (
	"context"
	"fmt"
	"os"
	"strconv"
)

// kube-scheduler's identity and files in the cluster directory.
const (
	// schedulerUser is kube-scheduler's client identity (its real user
	// name), so that the audit log names it.
	schedulerUser       = "system:kube-scheduler"
	schedulerKubeconfig = "scheduler.kubeconfig"
	schedulerConfig     = "scheduler-config.yaml"
	schedulerLog        = "kube-scheduler.log"
	schedulerCertDir    = "scheduler-certs"
)

// startScheduler starts the cluster's kube-scheduler (its own client
// certificate, leader election off, its secure port on loopback) and waits
// until /healthz answers.
func (cp *controlPlane) startScheduler(ctx context.Context, path string) (*process, error) {
	if err := cp.writeClientKubeconfig(cp.file(schedulerKubeconfig), schedulerUser, cp.schedulerID); err != nil {
		return nil, fmt.Errorf("cluster %q: kube-scheduler kubeconfig: %w", cp.cluster, err)
	}
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
`, strconv.Quote(cp.file(schedulerKubeconfig)))
	if err := os.WriteFile(cp.file(schedulerConfig), []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("cluster %q: kube-scheduler configuration: %w", cp.cluster, err)
	}
	return cp.startServing(ctx, "kube-scheduler", func(port int) *process {
		kc := cp.file(schedulerKubeconfig)
		return &process{
			name: "kube-scheduler", cluster: cp.cluster, path: path, logPath: cp.file(schedulerLog),
			args: []string{
				"--config=" + cp.file(schedulerConfig),
				"--authentication-kubeconfig=" + kc,
				"--authorization-kubeconfig=" + kc,
				"--bind-address=127.0.0.1",
				"--secure-port=" + strconv.Itoa(port),
				"--cert-dir=" + cp.file(schedulerCertDir),
				"--profiling=false",
			},
		}
	})
}
