package local

import (
	"strings"
	"testing"
)

// 1 + 19 needs more inotify instances than Linux's default 128 allows (the
// count that made a Kueue exit with "too many open files"); 1 + 3 does not.
func TestInotifyVerdict(t *testing.T) {
	big := inotifyNeeded(19, 20, true)
	if big <= 128 {
		t.Fatalf("1 + 19 needs %d; want more than 128 (Kueue ran out there)", big)
	}
	err := inotifyVerdict(big, 10, 128)
	if err == nil || !strings.Contains(err.Error(), "fs.inotify.max_user_instances") || !strings.Contains(err.Error(), "hold 10 of the 128") {
		t.Fatalf("err = %v; want the limit, what is held and how to raise it named", err)
	}
	if err := inotifyVerdict(inotifyNeeded(3, 4, true), 10, 128); err != nil {
		t.Errorf("1 + 3: %v", err)
	}
	if err := inotifyVerdict(big, 10, 1024); err != nil {
		t.Errorf("1 + 19 under a raised limit: %v", err)
	}
	if _, ok := inotifyHeld(); !ok {
		t.Error("inotifyHeld could not count this process's instances")
	}
}
