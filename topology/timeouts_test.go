package topology

import (
	"context"
	"strings"
	"testing"
	"time"
)

type pacedProvider struct{ t Timeouts }

func (pacedProvider) Name() string { return "paced" }
func (pacedProvider) Provision(context.Context, Spec) (*Cluster, []*Cluster, error) {
	return nil, nil, nil
}
func (pacedProvider) Close(context.Context) error   { return nil }
func (p pacedProvider) SuggestedTimeouts() Timeouts { return p.t }

type unpacedProvider struct{ pacedProvider }

func (unpacedProvider) SuggestedTimeouts() {} // not a TimeoutSuggester

// TestTimeoutsPrecedence: Options.Timeouts wins field by field, then the
// provider's suggestion, then the local topology's pace.
func TestTimeoutsPrecedence(t *testing.T) {
	aks := Timeouts{Progress: 15 * time.Minute, Start: 10 * time.Minute}
	for _, tc := range []struct {
		name     string
		provider Provider
		given    Timeouts
		want     Timeouts
	}{
		{"no suggestion", unpacedProvider{}, Timeouts{}, Timeouts{DefaultProgressTimeout, DefaultStartTimeout}},
		{"suggested", pacedProvider{aks}, Timeouts{}, aks},
		{"half suggested", pacedProvider{Timeouts{Start: time.Minute}}, Timeouts{}, Timeouts{DefaultProgressTimeout, time.Minute}},
		{"given over suggested", pacedProvider{aks}, Timeouts{Start: 20 * time.Minute}, Timeouts{15 * time.Minute, 20 * time.Minute}},
		{"given, no suggestion", unpacedProvider{}, Timeouts{Progress: time.Hour}, Timeouts{time.Hour, DefaultStartTimeout}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Options{Workers: 1, Timeouts: tc.given}.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			topo := &Topology{Spec: spec, provider: tc.provider}
			if got := topo.Timeouts(); got != tc.want {
				t.Errorf("Timeouts() = %+v; want %+v", got, tc.want)
			}
		})
	}
	if got := (&Topology{}).Timeouts(); got != (Timeouts{DefaultProgressTimeout, DefaultStartTimeout}) {
		t.Errorf("a Topology with no provider: %+v; want the defaults", got)
	}
	for _, o := range []Options{{Workers: 1, Timeouts: Timeouts{Progress: -time.Second}}, {Workers: 1, Timeouts: Timeouts{Start: -time.Second}}} {
		if _, err := o.Resolve(); err == nil || !strings.Contains(err.Error(), "Options.Timeouts.") {
			t.Errorf("Resolve(%+v): %v; want an error naming the field", o.Timeouts, err)
		}
	}
}
