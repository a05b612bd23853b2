// Package inotify checks, before a topology starts, that its processes will
// find the inotify instances they need: Linux allows a user 128 by default,
// and a Kueue (or kubelet) that finds none exits at start with "couldn't
// initialize inotify: too many open files", far from the cause.
package inotify

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LimitFile is Linux's per-user limit on inotify instances.
const LimitFile = "/proc/sys/fs/inotify/max_user_instances"

// Check says when need more instances, for processes of user uid, would go
// past the limit given what that user's processes hold now; who names the
// processes in the error ("local: the topology's processes"). When the limit
// or the count cannot be read it says nothing (a start then fails, if it
// does, with the processes' own error).
func Check(who string, need int, uid uint32) error {
	raw, err := os.ReadFile(LimitFile)
	if err != nil {
		return nil
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil
	}
	held, ok := Held(uid)
	if !ok {
		return nil
	}
	return Verdict(who, need, held, limit)
}

// Verdict is Check's judgement.
func Verdict(who string, need, held, limit int) error {
	if held+need <= limit {
		return nil
	}
	return fmt.Errorf("%s need at least %d inotify instances and this user's processes hold %d of the %d Linux allows (fs.inotify.max_user_instances); raise the limit (sysctl -w fs.inotify.max_user_instances=1024, as .ci/run does) or start fewer clusters",
		who, need, held, limit)
}

// Held counts the inotify instances open in the processes of user uid.
func Held(uid uint32) (int, bool) {
	fds, err := filepath.Glob("/proc/[0-9]*/fd")
	if err != nil {
		return 0, false
	}
	n := 0
	for _, dir := range fds {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Dir(dir), &st); err != nil || st.Uid != uid {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && target == "anon_inode:inotify" {
				n++
			}
		}
	}
	return n, true
}
