package local

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestRayHeadRefusesOtherDestinations: the KubeRay operator's HTTP_PROXY
// stand-in answers only for Ray head dashboards (a Service's port 8265);
// any other plain-HTTP destination gets 502 naming it, so nothing the
// operator tries elsewhere passes unnoticed.
func TestRayHeadRefusesOtherDestinations(t *testing.T) {
	h, err := startRayHead("worker-1", &rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	proxy, _ := url.Parse(h.url())
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	for _, target := range []string{"http://example.com/", "http://rc-head-svc.default.svc.cluster.local:8080/api/jobs/", "http://10.0.0.1:8265/api/jobs/"} {
		resp, err := hc.Get(target)
		if err != nil {
			t.Fatalf("GET %s through the stand-in: %v", target, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `cluster "worker-1"`) {
			t.Errorf("GET %s: %d %q, want 502 naming the cluster", target, resp.StatusCode, body)
		}
	}
}
