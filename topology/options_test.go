package topology

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestResolveRejectsBadInput(t *testing.T) {
	neg := -time.Second
	cases := []struct {
		name string
		opts Options
		want []string // substrings of the one error
	}{
		{"zero workers", Options{}, []string{"Options.Workers", "0 workers", "1 to 20"}},
		{"21 workers", Options{Workers: 21}, []string{"Options.Workers", "21 workers", "1 to 20"}},
		{"21 named workers", Options{WorkerNames: make([]string, 21)}, []string{"Options.WorkerNames", "21 workers"}},
		{"duplicate worker names", Options{WorkerNames: []string{"east", "west", "east"}}, []string{"Options.WorkerNames[2]", `duplicate cluster name "east"`, "Options.WorkerNames[0]"}},
		{"worker named like the manager", Options{WorkerNames: []string{"manager"}}, []string{"Options.WorkerNames[0]", `duplicate cluster name "manager"`, "Options.ManagerName"}},
		{"invalid cluster name", Options{WorkerNames: []string{"Bad_Name"}}, []string{"Options.WorkerNames[0]", `"Bad_Name"`}},
		{"quota that does not parse", Options{Workers: 2, WorkerQuota: Quota{CPU: "four", Memory: "8Gi"}}, []string{"Options.WorkerQuota.CPU", `"four"`, "quantity"}},
		{"per-worker quota that does not parse", Options{Workers: 2, WorkerQuotas: map[string]Quota{"worker-2": {CPU: "1", Memory: "lots"}}}, []string{`Options.WorkerQuotas["worker-2"].Memory`, `"lots"`}},
		{"manager quota that does not parse", Options{Workers: 1, ManagerQuota: &Quota{CPU: "1x", Memory: "1Gi"}}, []string{"Options.ManagerQuota.CPU", `"1x"`}},
		{"quota for an unknown worker", Options{Workers: 1, WorkerQuotas: map[string]Quota{"nope": {CPU: "1", Memory: "1Gi"}}}, []string{`Options.WorkerQuotas["nope"]`, "no worker"}},
		{"negative gc interval", Options{Workers: 1, Kueue: KueueOptions{GCInterval: &neg}}, []string{"Options.Kueue.GCInterval"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.opts.Resolve()
			if err == nil {
				t.Fatalf("Resolve accepted %+v", tc.opts)
			}
			t.Logf("error: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestResolveDefaults(t *testing.T) {
	s, err := Options{Workers: 3, WorkerQuotas: map[string]Quota{"worker-2": {CPU: "2", Memory: "4Gi"}}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.AllClusterNames(), ","); got != "manager,worker-1,worker-2,worker-3" {
		t.Errorf("names %s", got)
	}
	mgr := s.Quotas["manager"]
	if cpu := mgr.Cpu().String(); cpu != "10" {
		t.Errorf("manager cpu quota %s, want the sum 4+2+4=10", cpu)
	}
	if mem := mgr.Memory().String(); mem != "20Gi" {
		t.Errorf("manager memory quota %s, want 20Gi", mem)
	}
	if s.GCInterval() != time.Minute || s.WorkerLostTimeout() != 15*time.Minute {
		t.Errorf("gc %s lost %s", s.GCInterval(), s.WorkerLostTimeout())
	}
	if s.Kueue.Dispatcher != DispatcherAllAtOnce || s.Kueue.Integrations[0] != IntegrationBatchJob {
		t.Errorf("kueue defaults %+v", s.Kueue)
	}
	zero := time.Duration(0)
	s, err = Options{Workers: 1, Kueue: KueueOptions{GCInterval: &zero}}.Resolve()
	if err != nil || s.GCInterval() != 0 {
		t.Errorf("gcInterval 0 must disable GC: %v %s", err, s.GCInterval())
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := Secret("users:\n- token: abc")
	for _, f := range []string{"%v", "%s", "%q", "%x", "%#v", "%+v"} {
		if out := fmt.Sprintf(f, s); strings.Contains(out, "abc") {
			t.Errorf("%s printed %q", f, out)
		}
	}
	c := &Cluster{Name: "w", Kubeconfig: s}
	if out := fmt.Sprintf("%+v", *c); strings.Contains(out, "abc") {
		t.Errorf("cluster printed %q", out)
	}
}
