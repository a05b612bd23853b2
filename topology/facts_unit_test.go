package topology

import "testing"

func TestImageTag(t *testing.T) {
	for in, want := range map[string]string{
		"registry.k8s.io/kueue/kueue:v0.19.2":                 "v0.19.2",
		"localhost:5000/kueue:v0.18.4":                        "v0.18.4",
		"localhost:5000/kueue":                                "",
		"registry.k8s.io/kueue/kueue@sha256:0123":             "",
		"registry.k8s.io/kueue/kueue:v0.17.1@sha256:0123abcd": "v0.17.1",
		"": "",
	} {
		if got := imageTag(in); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", in, got, want)
		}
	}
}
