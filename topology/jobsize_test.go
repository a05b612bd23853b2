package topology

import "testing"

type sizedProvider struct {
	pacedProvider
	s JobSize
}

func (p sizedProvider) SuggestedJobSize() JobSize { return p.s }

// TestJobSizeIsTheProvidersElseTheDefault: a provider's suggestion wins
// field by field; without one (or without a provider) the local topology's
// 1 CPU and 1 Gi.
func TestJobSizeIsTheProvidersElseTheDefault(t *testing.T) {
	def := JobSize{CPU: DefaultJobCPU, Memory: DefaultJobMemory}
	for _, tc := range []struct {
		name     string
		provider Provider
		want     JobSize
	}{
		{"no suggestion", pacedProvider{}, def},
		{"suggested", sizedProvider{s: JobSize{CPU: "100m", Memory: "64Mi"}}, JobSize{CPU: "100m", Memory: "64Mi"}},
		{"half suggested", sizedProvider{s: JobSize{CPU: "250m"}}, JobSize{CPU: "250m", Memory: DefaultJobMemory}},
		{"no provider", nil, def},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (&Topology{provider: tc.provider}).JobSize(); got != tc.want {
				t.Errorf("JobSize() = %+v; want %+v", got, tc.want)
			}
		})
	}
}
