package connect

import (
	"testing"

	"k8s.io/client-go/rest"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/multikueue-testkit/testkit/topology"
)

// TestNextIdentity: the default name of a rotated identity counts up.
func TestNextIdentity(t *testing.T) {
	for in, want := range map[string]string{
		"multikueue-manager":    "multikueue-manager-r2",
		"multikueue-manager-r2": "multikueue-manager-r3",
		"a-r9":                  "a-r10",
		"r2":                    "r2-r2",
	} {
		if got := nextIdentity(in); got != want {
			t.Errorf("nextIdentity(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestTokenSecretOfReadsWhatAccessProviderWrites: Rotate finds the token
// Secret of a ClusterProfile where Connect named it, and says so when a
// profile names none.
func TestTokenSecretOfReadsWhatAccessProviderWrites(t *testing.T) {
	w := &topology.Cluster{Name: "worker-1", Config: &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}}
	ap, err := AccessProvider(w, "multikueue-worker-1-token")
	if err != nil {
		t.Fatal(err)
	}
	cp := inventoryv1alpha1.ClusterProfile{Status: inventoryv1alpha1.ClusterProfileStatus{AccessProviders: []inventoryv1alpha1.AccessProvider{ap}}}
	if got, err := tokenSecretOf(cp); err != nil || got != "multikueue-worker-1-token" {
		t.Errorf("tokenSecretOf = %q, %v; want multikueue-worker-1-token", got, err)
	}
	if _, err := tokenSecretOf(inventoryv1alpha1.ClusterProfile{}); err == nil {
		t.Error("tokenSecretOf of a profile with no access provider: no error")
	}
}
