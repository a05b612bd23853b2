package local

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/multikueue-testkit/testkit/topology"
)

// kube-controller-manager runs as a child process of every cluster, with
// only the controllers a test cluster without nodes needs. It replaces the
// owner garbage collector stand-in the local topology had: the real garbage
// collector honours propagation policies (foreground deletion included) and
// collects every owned object (Workloads, child Jobs, pods, RayClusters,
// Services), and the namespace controller finishes namespace deletions.
//
// It cannot run in-process: k8s.io/kubernetes/pkg/features and Kueue's
// features package both register DynamicResourceAllocation, which panics at
// init.

// Controller names of k8s.io/kubernetes/cmd/kube-controller-manager/names
// (v1.36); an unknown name makes kube-controller-manager exit.
const (
	kcmGarbageCollector = "garbage-collector-controller"
	kcmNamespace        = "namespace-controller"
	kcmJob              = "job-controller"
	kcmDeployment       = "deployment-controller"
	kcmReplicaSet       = "replicaset-controller"
	kcmStatefulSet      = "statefulset-controller"
	kcmEndpointSlice    = "endpointslice-controller"
)

// kcmUser is kube-controller-manager's client identity (its real user name),
// in system:masters: with --use-service-account-credentials=false every
// controller uses it.
const kcmUser = "system:kube-controller-manager"

// Files of kube-controller-manager in the cluster's directory.
const (
	kcmKubeconfig = "controller-manager.kubeconfig"
	kcmLog        = "kube-controller-manager.log"
	kcmCertDir    = "controller-manager-certs"
)

// kcmControllers are the controllers a cluster runs: the garbage collector
// and the namespace controller everywhere, the Job controller on the
// workers, where pods run (the manager's Jobs are MultiKueue's), and the
// controllers of the built-in serving kinds whose integrations are on
// (builtinControllers) everywhere: on the manager they make the pods Kueue's
// pod integration gates and admits (a Deployment's pods are what MultiKueue
// dispatches; a StatefulSet's stay gated there while its copy runs on a
// worker), as on the clusters Kueue's own e2e tests use.
func kcmControllers(jobs bool, builtin []string) []string {
	out := []string{kcmGarbageCollector, kcmNamespace}
	if jobs {
		out = append(out, kcmJob)
	}
	return append(out, builtin...)
}

// builtinControllers are the kube-controller-manager controllers the
// built-in serving kinds among integrations need (and the StatefulSets a
// LeaderWorkerSet's controller makes, the EndpointSlices of a RayService's
// serve Service).
func builtinControllers(integrations []string) []string {
	var out []string
	if slices.Contains(integrations, topology.IntegrationDeployment) {
		out = append(out, kcmDeployment, kcmReplicaSet)
	}
	// A LeaderWorkerSet's groups are StatefulSets.
	if slices.Contains(integrations, topology.IntegrationStatefulSet) || slices.Contains(integrations, topology.IntegrationLeaderWorkerSet) {
		out = append(out, kcmStatefulSet)
	}
	// KubeRay calls a RayService ready once its serve Service has a ready
	// endpoint, which it counts in the Service's EndpointSlices.
	if slices.Contains(integrations, topology.IntegrationRayService) {
		out = append(out, kcmEndpointSlice)
	}
	return out
}

// startControllerManager writes kube-controller-manager's kubeconfig (its
// own client certificate, mode 0600), starts it with the given controllers,
// no leader election and its secure port on loopback, and waits until
// /healthz answers. A start that loses its port race is retried.
func (cp *controlPlane) startControllerManager(ctx context.Context, controllers []string) error {
	if cp.bins.ControllerManager == "" {
		return fmt.Errorf("cluster %q: no kube-controller-manager binary", cp.cluster)
	}
	if err := cp.writeClientKubeconfig(cp.file(kcmKubeconfig), kcmUser, cp.kcmID); err != nil {
		return fmt.Errorf("cluster %q: kube-controller-manager kubeconfig: %w", cp.cluster, err)
	}
	var err error
	cp.kcm, err = cp.startServing(ctx, "kube-controller-manager", func(port int) *process { return cp.newControllerManager(port, controllers) })
	return err
}

// startServing starts the process newProc makes for a free loopback port
// (its secure port, self-signed) and waits until its /healthz answers; a
// start that loses its port race is retried on another port.
func (cp *controlPlane) startServing(ctx context.Context, name string, newProc func(port int) *process) (*process, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var port int
		if port, err = cp.ports.free(); err != nil {
			return nil, err
		}
		p := newProc(port)
		if err = p.start(); err != nil {
			return nil, err
		}
		hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // readiness probe of a loopback server only
		}}
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
		err = cp.waitHealthy(ctx, p, fmt.Sprintf("cluster %q: %s to answer %s", cp.cluster, name, url), func() error { return getOK(hc, url) })
		hc.CloseIdleConnections()
		if err == nil {
			return p, nil
		}
		_ = p.stop(procStopTimeout)
		if !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
	return nil, err
}

func (cp *controlPlane) newControllerManager(port int, controllers []string) *process {
	kc := cp.file(kcmKubeconfig)
	return &process{
		name: "kube-controller-manager", cluster: cp.cluster, path: cp.bins.ControllerManager, logPath: cp.file(kcmLog),
		args: []string{
			"--kubeconfig=" + kc,
			// Delegated authentication and authorization of its own
			// endpoints (only /healthz is probed, an always-allowed path).
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--controllers=" + strings.Join(controllers, ","),
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + cp.file(kcmCertDir),
			"--profiling=false",
		},
	}
}

// writeClientKubeconfig writes a kubeconfig for one of the cluster's client
// identities at path, mode 0600 (it is removed with the cluster directory).
func (cp *controlPlane) writeClientKubeconfig(path, user string, id keyPair) error {
	return cp.writeNamespacedKubeconfig(path, user, id, "")
}

// writeNamespacedKubeconfig is writeClientKubeconfig with a namespace in
// its context ("" for none).
func (cp *controlPlane) writeNamespacedKubeconfig(path, user string, id keyPair, namespace string) error {
	return cp.writeKubeconfigVia(path, cp.host(), user, id, namespace)
}

// writeKubeconfigVia is writeNamespacedKubeconfig reaching the API server at
// server (a forwarder in front of it) instead of its own address.
func (cp *controlPlane) writeKubeconfigVia(path, server, user string, id keyPair, namespace string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cp.cluster] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cp.ca.certPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: id.cert, ClientKeyData: id.key}
	cfg.Contexts[cp.cluster] = &clientcmdapi.Context{Cluster: cp.cluster, AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = cp.cluster
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}
