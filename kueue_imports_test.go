package testkit_test

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// kueueImportAllowed says whether library code may import a Kueue package:
// its API types and generated clients, which stay stable across releases
// (so the library builds inside Kueue's own repository, against Kueue's
// main), and the listed exceptions.
func kueueImportAllowed(importer, pkg string) (bool, string) {
	switch {
	case strings.HasPrefix(pkg, "sigs.k8s.io/kueue/apis/"), strings.HasPrefix(pkg, "sigs.k8s.io/kueue/client-go/"):
		return true, ""
	case pkg == "sigs.k8s.io/kueue/pkg/controller/constants":
		return true, "label and annotation keys Kueue puts on job objects; constants only"
	}
	for _, ex := range kueueImportExceptions() {
		if ex[0] == importer && ex[1] == pkg {
			return true, ex[2]
		}
	}
	return false, ""
}

// kueueImportExceptions are {importer, package, why}: to be removed.
func kueueImportExceptions() [][3]string {
	return [][3]string{}
}

// TestLibraryImportsOnlyKueueAPIs lists the Kueue packages that the
// library's non-test packages import directly and fails on any that is
// neither API nor a listed exception.
func TestLibraryImportsOnlyKueueAPIs(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	used := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.Contains(f[0], "/examples") {
			continue
		}
		for _, pkg := range f[1:] {
			if !strings.HasPrefix(pkg, "sigs.k8s.io/kueue/") {
				continue
			}
			used[pkg] = append(used[pkg], f[0])
			if ok, _ := kueueImportAllowed(f[0], pkg); !ok {
				t.Errorf("%s imports %s: library code may import only Kueue's apis/ and client-go/ (see kueueImportAllowed)", f[0], pkg)
			}
		}
	}
	pkgs := make([]string, 0, len(used))
	for p := range used {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		t.Logf("%s <- %s", p, strings.Join(used[p], ", "))
	}
}
