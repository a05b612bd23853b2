package assert

import (
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/topology"
)

// The Incremental dispatcher's rule differs by Kueue version: v0.17.1 and
// v0.18.x nominate 3 per round by name; v0.19.x, with its two gates on by
// default, in spec.clusters order with the configured step size.
func TestIncrementalRulePerVersion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		facts topology.KueueFacts
		step  int
		order bool
		basis string
	}{
		{"v0.17.1", topology.KueueFacts{Version: "v0.17.1", IncrementalStepSize: 5}, 3, false, "Kueue v0.17.1"},
		{"v0.18.4", topology.KueueFacts{Version: "v0.18.4"}, 3, false, "Kueue v0.18.4"},
		{"v0.19.2", topology.KueueFacts{Version: "v0.19.2"}, 3, true, "Kueue v0.19.2"},
		{"v0.19.2 step 1", topology.KueueFacts{Version: "v0.19.2", IncrementalStepSize: 1}, 1, true, "Kueue v0.19.2"},
		{"v0.19.2 order gate off", topology.KueueFacts{Version: "v0.19.2", FeatureGates: map[string]bool{GateIncrementalDispatcherRespectConfigOrder: false}}, 3, false, "Kueue v0.19.2"},
		{"v0.19.2 config gate off", topology.KueueFacts{Version: "v0.19.2", IncrementalStepSize: 1, FeatureGates: map[string]bool{GateIncrementalDispatcherConfig: false}}, 3, true, "Kueue v0.19.2"},
		{"unknown version", topology.KueueFacts{}, 3, false, "not read"},
		{"unknown version, gates given", topology.KueueFacts{FeatureGates: map[string]bool{GateIncrementalDispatcherRespectConfigOrder: true}}, 3, true, "feature gates"},
	} {
		r := incrementalRuleOf(tc.facts)
		if r.step != tc.step || r.configOrder != tc.order || !strings.Contains(r.basis, tc.basis) {
			t.Errorf("%s: got %+v, want step %d, config order %v, basis containing %q", tc.name, r, tc.step, tc.order, tc.basis)
		}
	}
}

func TestInOrder(t *testing.T) {
	got := inOrder([]string{"alpha", "bravo", "delta", "zulu"}, []string{"delta", "alpha", "charlie", "bravo"})
	if strings.Join(got, ",") != "delta,alpha,bravo,zulu" {
		t.Fatalf("got %v", got)
	}
}
