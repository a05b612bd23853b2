package kind

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/multikueue-testkit/testkit/topology"
)

// pki is a CA and a client certificate it signed, as kind's kubeadm makes
// them.
type pki struct {
	caPEM, certPEM, keyPEM []byte
}

func newPKI(t *testing.T) pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"kubeadm:cluster-admins"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pki{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

// kindKubeconfig writes a kubeconfig shaped like kind's: context, cluster
// and user all named kind-<cluster>.
func kindKubeconfig(t *testing.T, kindName, server string, p pki) []byte {
	t.Helper()
	n := "kind-" + kindName
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[n] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos[n] = &clientcmdapi.AuthInfo{ClientCertificateData: p.certPEM, ClientKeyData: p.keyPEM}
	cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n}
	cfg.CurrentContext = n
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestFromKubeconfigsSplitsTheTwoAddresses(t *testing.T) {
	p := newPKI(t)
	ext := kindKubeconfig(t, "mktk-worker-1", "https://127.0.0.1:40123", p)
	in := kindKubeconfig(t, "mktk-worker-1", "https://mktk-worker-1-control-plane:6443", p)
	c, err := FromKubeconfigs("worker-1", ext, in)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "worker-1" {
		t.Errorf("Name = %q, want worker-1", c.Name)
	}
	if c.Config.Host != "https://127.0.0.1:40123" {
		t.Errorf("Config.Host = %q, want the external address", c.Config.Host)
	}
	if c.ManagerServer != "https://mktk-worker-1-control-plane:6443" {
		t.Errorf("ManagerServer = %q, want the internal address", c.ManagerServer)
	}
	if string(c.Config.TLSClientConfig.CAData) != string(p.caPEM) || string(c.Config.TLSClientConfig.CertData) != string(p.certPEM) || string(c.Config.TLSClientConfig.KeyData) != string(p.keyPEM) {
		t.Error("Config does not carry the kubeconfig's CA, client certificate and key")
	}
	// The credentials are usable: a TLS transport builds from them.
	if _, err := rest.TransportFor(c.Config); err != nil {
		t.Errorf("rest.TransportFor: %v", err)
	}
	tc := &topology.Cluster{Name: c.Name, Config: c.Config, ManagerServer: c.ManagerServer}
	if got := tc.ServerForManager(); got != "https://mktk-worker-1-control-plane:6443" {
		t.Errorf("ServerForManager() = %q, want the internal address", got)
	}
}

func TestFromKubeconfigsSameAddressLeavesManagerServerEmpty(t *testing.T) {
	p := newPKI(t)
	kc := kindKubeconfig(t, "m", "https://10.0.0.5:6443", p)
	c, err := FromKubeconfigs("manager", kc, kc)
	if err != nil {
		t.Fatal(err)
	}
	if c.ManagerServer != "" {
		t.Errorf("ManagerServer = %q, want empty (same address)", c.ManagerServer)
	}
}

func TestFromKubeconfigsRejects(t *testing.T) {
	p, other := newPKI(t), newPKI(t)
	good := kindKubeconfig(t, "w", "https://127.0.0.1:1234", p)
	secret := base64.StdEncoding.EncodeToString(p.keyPEM)
	noCurrent := func() []byte {
		cfg, _ := clientcmd.Load(good)
		cfg.CurrentContext = ""
		raw, _ := clientcmd.Write(*cfg)
		return raw
	}()
	danglingContext := func() []byte {
		cfg, _ := clientcmd.Load(good)
		cfg.CurrentContext = "elsewhere"
		raw, _ := clientcmd.Write(*cfg)
		return raw
	}()
	danglingCluster := func() []byte {
		cfg, _ := clientcmd.Load(good)
		cfg.Contexts[cfg.CurrentContext].Cluster = "gone"
		raw, _ := clientcmd.Write(*cfg)
		return raw
	}()
	for _, tc := range []struct {
		name     string
		ext, in  []byte
		contains []string
	}{
		{"empty external", nil, good, []string{`cluster "w"`, "external kubeconfig: empty"}},
		{"empty internal", good, []byte("  \n"), []string{"internal kubeconfig: empty"}},
		{"not YAML, with a key in it", []byte("users:\n- user:\n    client-key-data: " + secret + "\n  [oops"), good, []string{"external kubeconfig"}},
		{"no current context", noCurrent, good, []string{"external kubeconfig: no current-context"}},
		{"current context missing", good, danglingContext, []string{"internal kubeconfig", `current-context "elsewhere"`}},
		{"context names a missing cluster", good, danglingCluster, []string{"internal kubeconfig", `cluster "gone"`}},
		{"plain http", good, kindKubeconfig(t, "w", "http://w-control-plane:6443", p), []string{"internal kubeconfig", "not an https URL"}},
		{"another cluster's CA", good, kindKubeconfig(t, "w", "https://w-control-plane:6443", other), []string{"another certificate authority", "not the same cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromKubeconfigs("w", tc.ext, tc.in)
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.contains {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			for _, leak := range []string{secret, "BEGIN", string(p.caPEM), base64.StdEncoding.EncodeToString(p.caPEM)} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error leaks credentials: %q", err)
				}
			}
		})
	}
}
