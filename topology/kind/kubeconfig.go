package kind

import (
	"bytes"
	"fmt"
	"net/url"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/multikueue-testkit/testkit/internal/redact"
	"github.com/multikueue-testkit/testkit/topology/existing"
)

// FromKubeconfigs turns a kind cluster's two kubeconfigs into a cluster to
// attach with topology/existing: external is what `kind get kubeconfig`
// prints (the API server on 127.0.0.1, for the test process), internal what
// `kind get kubeconfig --internal` prints (https://<cluster>-control-plane:6443
// on the runtime's "kind" network, for the manager's Kueue pods). The
// returned Cluster's Config comes from external; its ManagerServer is
// internal's server (empty when both name the same address).
//
// Checked: both parse, have a current context naming a cluster with an
// https server, and trust the same certificate authority (kind gives both
// the same CA and credentials; only the server differs), so that the two
// describe one cluster. Not checked: that the servers answer. Errors never
// contain kubeconfig contents.
func FromKubeconfigs(name string, external, internal []byte) (existing.Cluster, error) {
	ext, extCluster, err := currentCluster("external", external)
	if err != nil {
		return existing.Cluster{}, fmt.Errorf("kind: cluster %q: %w", name, err)
	}
	_, intCluster, err := currentCluster("internal", internal)
	if err != nil {
		return existing.Cluster{}, fmt.Errorf("kind: cluster %q: %w", name, err)
	}
	if !bytes.Equal(extCluster.CertificateAuthorityData, intCluster.CertificateAuthorityData) || extCluster.CertificateAuthority != intCluster.CertificateAuthority {
		return existing.Cluster{}, fmt.Errorf("kind: cluster %q: the internal kubeconfig (server %s) trusts another certificate authority than the external one (server %s): not the same cluster", name, intCluster.Server, extCluster.Server)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*ext, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return existing.Cluster{}, fmt.Errorf("kind: cluster %q: external kubeconfig: %s", name, redact.String(err.Error()))
	}
	c := existing.Cluster{Name: name, Config: cfg}
	if intCluster.Server != extCluster.Server {
		c.ManagerServer = intCluster.Server
	}
	return c, nil
}

// currentCluster parses a kubeconfig and returns it with the cluster entry of
// its current context.
func currentCluster(which string, raw []byte) (*clientcmdapi.Config, *clientcmdapi.Cluster, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil, fmt.Errorf("%s kubeconfig: empty", which)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s kubeconfig: %s", which, redact.String(err.Error()))
	}
	if kc.CurrentContext == "" {
		return nil, nil, fmt.Errorf("%s kubeconfig: no current-context", which)
	}
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok || ctx == nil {
		return nil, nil, fmt.Errorf("%s kubeconfig: current-context %q is not among its contexts", which, kc.CurrentContext)
	}
	cl, ok := kc.Clusters[ctx.Cluster]
	if !ok || cl == nil {
		return nil, nil, fmt.Errorf("%s kubeconfig: context %q names cluster %q, which it does not define", which, kc.CurrentContext, ctx.Cluster)
	}
	u, err := url.Parse(cl.Server)
	switch {
	case cl.Server == "":
		return nil, nil, fmt.Errorf("%s kubeconfig: cluster %q has no server", which, ctx.Cluster)
	case err != nil:
		return nil, nil, fmt.Errorf("%s kubeconfig: cluster %q: server %q: %w", which, ctx.Cluster, cl.Server, err)
	case u.Scheme != "https" || u.Host == "":
		return nil, nil, fmt.Errorf("%s kubeconfig: cluster %q: server %q is not an https URL", which, ctx.Cluster, cl.Server)
	}
	return kc, cl, nil
}
