package inotify

import (
	"os"
	"strings"
	"testing"
)

func TestVerdict(t *testing.T) {
	err := Verdict("local: the topology's processes", 150, 10, 128)
	if err == nil || !strings.Contains(err.Error(), "fs.inotify.max_user_instances") || !strings.Contains(err.Error(), "hold 10 of the 128") ||
		!strings.HasPrefix(err.Error(), "local: the topology's processes need at least 150") {
		t.Fatalf("err = %v; want who, the need, the limit, what is held and how to raise it named", err)
	}
	if err := Verdict("x", 100, 10, 128); err != nil {
		t.Errorf("under the limit: %v", err)
	}
	if _, ok := Held(uint32(os.Getuid())); !ok {
		t.Error("Held could not count this user's instances")
	}
}
