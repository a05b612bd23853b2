package local

import (
	"testing"

	"github.com/multikueue-testkit/testkit/internal/inotify"
)

// 1 + 19 needs more inotify instances than Linux's default 128 allows (the
// count that made a Kueue exit with "too many open files"); 1 + 3 does not.
func TestInotifyVerdict(t *testing.T) {
	big := inotifyNeeded(19, 20, true)
	if big <= 128 {
		t.Fatalf("1 + 19 needs %d; want more than 128 (Kueue ran out there)", big)
	}
	if err := inotify.Verdict("local", big, 10, 128); err == nil {
		t.Fatal("1 + 19 under the default limit: no error")
	}
	if err := inotify.Verdict("local", inotifyNeeded(3, 4, true), 10, 128); err != nil {
		t.Errorf("1 + 3: %v", err)
	}
	if err := inotify.Verdict("local", big, 10, 1024); err != nil {
		t.Errorf("1 + 19 under a raised limit: %v", err)
	}
}
