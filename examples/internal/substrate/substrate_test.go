package substrate

import "testing"

func TestKindPrefixIsThePackages(t *testing.T) {
	for argv0, want := range map[string]string{
		"/tmp/go-build123/b001/ginkgo.test":        "mktk-ginkgo-",
		"/tmp/go-build123/b001/jobdispatch.test":   "mktk-jobdispatch-",
		"./My_Pkg.test":                            "mktk-mypkg-",
		"/tmp/x/averyveryverylongpackagename.test": "mktk-", // the control plane's host name must stay short
		"/tmp/x/.test":                             "mktk-",
	} {
		if got := kindPrefix(argv0); got != want {
			t.Errorf("kindPrefix(%q) = %q, want %q", argv0, got, want)
		}
	}
}
