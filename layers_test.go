package testkit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProvidersImportNothingAbove: data flows one way (topology → connect →
// workload → observe → assert → scenario), so the providers under
// topology/ import only topology, connect and internal packages of this
// module; what a provider offers beyond topology.Provider is declared in
// topology (capabilities.go), not in the packages that use it.
func TestProvidersImportNothingAbove(t *testing.T) {
	const mod = "github.com/multikueue-testkit/testkit/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./topology/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n++
		for _, pkg := range f[1:] {
			rel, ok := strings.CutPrefix(pkg, mod)
			if !ok || rel == "topology" || strings.HasPrefix(rel, "topology/") || rel == "connect" || strings.HasPrefix(rel, "internal/") {
				continue
			}
			t.Errorf("%s imports %s: a provider may import only topology, connect and internal packages", f[0], pkg)
		}
	}
	if n < 5 {
		t.Errorf("listed %d packages under ./topology; the listing is broken", n)
	}
}
