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

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		have, want    string
		atLeast, know bool
	}{
		{"v0.19.2", "v0.19.0", true, true},
		{"v0.18.4", "v0.19.0", false, true},
		{"v0.19.99-checkout", "v0.19.0", true, true},
		{"", "v0.19.0", false, false},
		{"latest", "v0.19.0", false, false},
	} {
		a, k := KueueFacts{Version: tc.have}.VersionAtLeast(tc.want)
		if a != tc.atLeast || k != tc.know {
			t.Errorf("%q >= %q: got %v, %v", tc.have, tc.want, a, k)
		}
	}
}

// Say marks a fact that was assumed, and only that one.
func TestSayMarksAssumedFacts(t *testing.T) {
	f := KueueFacts{Assumed: map[string]string{FactOrigin: "Kueue's default assumed"}}
	if got := f.Say(FactGCInterval, "30s"); got != "gcInterval 30s" {
		t.Errorf("Say(gcInterval) = %q", got)
	}
	if got, want := f.Say(FactOrigin, "multikueue"), "origin multikueue (unknown: Kueue's default assumed)"; got != want {
		t.Errorf("Say(origin) = %q, want %q", got, want)
	}
}
