package connect_test

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/topology"
)

// TestTokenKubeconfigHasWhatKueueAccepts checks the kubeconfig against the
// fields Kueue v0.17.0 validates (validateKubeconfig and validateRestConfig
// in pkg/controller/admissionchecks/multikueue, not exported): no tokenFile,
// no insecure TLS, the CA inline and not a path, a server, no basic auth,
// exec or auth provider. It also checks the server is ServerForManager.
func TestTokenKubeconfigHasWhatKueueAccepts(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	for _, tc := range []struct {
		name, managerServer, wantServer string
	}{
		{name: "host", wantServer: "https://127.0.0.1:6443"},
		{name: "address seen from the manager", managerServer: "https://worker-1-control-plane:6443", wantServer: "https://worker-1-control-plane:6443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &topology.Cluster{Name: "worker-1", Config: &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, ManagerServer: tc.managerServer}
			raw, err := connect.TokenKubeconfig(c, "tok-123")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 {
				t.Fatalf("%d clusters, %d users; want one each", len(cfg.Clusters), len(cfg.AuthInfos))
			}
			for name, cl := range cfg.Clusters {
				if cl.InsecureSkipTLSVerify {
					t.Errorf("cluster %s: insecure-skip-tls-verify", name)
				}
				if cl.CertificateAuthority != "" || string(cl.CertificateAuthorityData) != string(ca) {
					t.Errorf("cluster %s: CA path %q, inline CA %q; want the CA inline", name, cl.CertificateAuthority, cl.CertificateAuthorityData)
				}
				if cl.Server != tc.wantServer {
					t.Errorf("cluster %s: server %q, want %q", name, cl.Server, tc.wantServer)
				}
			}
			for name, u := range cfg.AuthInfos {
				if u.TokenFile != "" || u.Token != "tok-123" {
					t.Errorf("user %s: tokenFile %q, token set %v; want the token inline", name, u.TokenFile, u.Token == "tok-123")
				}
				if u.Exec != nil || u.AuthProvider != nil || u.Username != "" || u.Password != "" || len(u.ClientCertificateData) > 0 {
					t.Errorf("user %s: other credentials than the token", name)
				}
			}
			rc, err := clientcmd.RESTConfigFromKubeConfig(raw)
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != tc.wantServer || rc.BearerTokenFile != "" || rc.ExecProvider != nil || rc.AuthProvider != nil {
				t.Errorf("rest config: host %q, bearerTokenFile %q, exec %v, auth provider %v", rc.Host, rc.BearerTokenFile, rc.ExecProvider, rc.AuthProvider)
			}
		})
	}
}

func TestTokenKubeconfigWithoutInlineCA(t *testing.T) {
	c := &topology.Cluster{Name: "worker-1", Config: &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAFile: "/etc/ca.crt"}}}
	_, err := connect.TokenKubeconfig(c, "tok-secret-123")
	if err == nil || !strings.Contains(err.Error(), `"worker-1"`) || !strings.Contains(err.Error(), "CA") {
		t.Fatalf("want an error naming the cluster and the CA, got %v", err)
	}
	if strings.Contains(err.Error(), "tok-secret-123") {
		t.Error("the error shows the token")
	}
}
