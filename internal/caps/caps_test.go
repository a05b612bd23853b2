package caps

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The bounding set read on this project's VMs: every capability up to
// CAP_CHECKPOINT_RESTORE but CAP_SYS_RESOURCE.
const vmStatus = "Name:\tbash\nCapInh:\t0000000000000000\nCapBnd:\t000001fffeffffff\nCapAmb:\t0000000000000000\n"

func TestParseAndMissing(t *testing.T) {
	s, err := Parse(vmStatus)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Missing(40); !reflect.DeepEqual(got, []string{"CAP_SYS_RESOURCE"}) {
		t.Errorf("Missing = %v, want [CAP_SYS_RESOURCE]", got)
	}
	if !s.Has("CAP_SYS_ADMIN") || s.Has("CAP_SYS_RESOURCE") || s.Has("CAP_NO_SUCH") {
		t.Errorf("Has is wrong for %x", uint64(s))
	}
	if _, err := Parse("Name:\tx\n"); err == nil {
		t.Error("a status without CapBnd parsed")
	}
	if _, err := Parse("CapBnd:\tzz\n"); err == nil {
		t.Error("a bad CapBnd parsed")
	}
}

func TestSpecFiles(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []SpecFile
	}{
		{[]string{"--root", "/run/runc", "--log", "/x/log.json", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/b/pid", "id1"}, []SpecFile{{Path: "/b/config.json"}}},
		{[]string{"run", "-b=/b", "id1"}, []SpecFile{{Path: "config.json"}}}, // -b=... is not a runc spelling: the working directory
		{[]string{"run", "--bundle=/b", "id1"}, []SpecFile{{Path: "/b/config.json"}}},
		{[]string{"create", "id1"}, []SpecFile{{Path: "config.json"}}},
		{[]string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id1"}, []SpecFile{{Path: "/tmp/p.json", Process: true}}},
		{[]string{"exec", "id1", "true"}, nil},
		{[]string{"--root", "/r", "start", "id1"}, nil},
		{[]string{"delete", "--force", "id1"}, nil},
	} {
		if got := SpecFiles(tc.args); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SpecFiles(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestFilterKeepsEverythingElse(t *testing.T) {
	keep, _ := Parse(vmStatus)
	cfg := `{"ociVersion":"1.0.2","process":{"args":["/sbin/init"],"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_FUTURE"],"effective":["CAP_SYS_RESOURCE"]},"cwd":"/"},"root":{"path":"rootfs"}}`
	out, changed, err := Filter([]byte(cfg), false, keep)
	if err != nil || !changed {
		t.Fatalf("Filter: changed=%v err=%v", changed, err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	// A capability this package does not know is left for runc to judge.
	json.Unmarshal([]byte(`{"ociVersion":"1.0.2","process":{"args":["/sbin/init"],"capabilities":{"bounding":["CAP_CHOWN","CAP_FUTURE"],"effective":[]},"cwd":"/"},"root":{"path":"rootfs"}}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Filter = %s", out)
	}
	proc := `{"args":["true"],"capabilities":{"bounding":["CAP_CHOWN"]}}`
	if out, changed, err := Filter([]byte(proc), true, keep); err != nil || changed || string(out) != proc {
		t.Errorf("a process file with nothing to drop changed: %s %v %v", out, changed, err)
	}
	if _, _, err := Filter([]byte(`{"process":{"capabilities":[1]}}`), false, keep); err == nil {
		t.Error("malformed capabilities accepted")
	}
}
