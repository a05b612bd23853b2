package assert

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// IncrementalRoundSize is how many clusters the Incremental dispatcher adds
// per round by default (DefaultStepSize in every release so far).
const IncrementalRoundSize = 3

// Feature gates of Kueue v0.19 that change the Incremental dispatcher; both
// Beta and on by default from v0.19.0, absent before.
const (
	GateIncrementalDispatcherConfig             = "MultiKueueIncrementalDispatcherConfig"
	GateIncrementalDispatcherRespectConfigOrder = "MultiKueueIncrementalDispatcherRespectConfigOrder"
)

// incrementalRule is how the Incremental dispatcher of the Kueue under test
// picks clusters: step clusters per round, in the MultiKueueConfig's order
// (configOrder) or by name; basis says what it was read from.
type incrementalRule struct {
	step        int
	configOrder bool
	basis       string
}

func (r incrementalRule) String() string {
	order := "in name order"
	if r.configOrder {
		order = "in the MultiKueueConfig's spec.clusters order"
	}
	return fmt.Sprintf("at most %d clusters per round, %s (%s)", r.step, order, r.basis)
}

// gateOn is a gate's state from the facts: explicit, else its default from
// the version (on from since, off before); assumed says when the version
// was not known and off was taken.
func gateOn(f topology.KueueFacts, gate, since string) (on bool, assumed bool) {
	if v, ok := f.FeatureGates[gate]; ok {
		return v, false
	}
	atLeast, known := f.VersionAtLeast(since)
	return atLeast, !known
}

// incrementalRuleOf is the rule of the Kueue the facts describe: from
// v0.19.0 its gates (on by default) make it follow spec.clusters order and
// take multiKueue.incrementalDispatcherConfig.stepSize; before, 3 per round
// in name order.
func incrementalRuleOf(f topology.KueueFacts) incrementalRule {
	r := incrementalRule{step: IncrementalRoundSize}
	order, assumedOrder := gateOn(f, GateIncrementalDispatcherRespectConfigOrder, "v0.19.0")
	cfg, _ := gateOn(f, GateIncrementalDispatcherConfig, "v0.19.0")
	r.configOrder = order
	if cfg && f.IncrementalStepSize > 0 {
		r.step = f.IncrementalStepSize
	}
	switch {
	case assumedOrder:
		r.basis = "Kueue's version was not read: assumed the rule before v0.19"
	case f.Version != "":
		r.basis = "Kueue " + f.Version
	default:
		r.basis = "Kueue's feature gates"
	}
	return r
}

// DispatchedIncrementally checks the nominations of the Incremental
// dispatcher before each admission cycle: the successive values of
// nominatedClusterNames grow in rounds, round k naming the first k × step
// Active workers (fewer when fewer are Active), by the rule of the Kueue the
// cluster runs (Topology.Facts): before v0.19, step 3 in name order; from
// v0.19 (gates MultiKueueIncrementalDispatcherConfig and
// ...RespectConfigOrder, on by default), the configured stepSize (3 unless
// set) in the MultiKueueConfig's spec.clusters order, as the manager holds
// it. It waits (as long as the topology progresses; see Checker.Timeout) for
// the workload to be placed. It does not check the 5-minute round timeout,
// nor which worker won; rounds after the first are checked as cumulative,
// which is what v0.17 does.
func (c *Checker) DispatchedIncrementally(ctx context.Context, job client.Object) error {
	t, err := c.resolveFor(ctx, "DispatchedIncrementally", job)
	if err != nil {
		return err
	}
	waitErr := c.waitPlaced(ctx, t)
	wl, _ := c.history(t)
	mgr := c.Topo.Manager.Name
	_, problems := cyclesOf(wl, mgr)
	if waitErr != nil {
		problems = append(problems, c.waited(ctx, t, waitErr)...)
	}
	t0 := firstTime(wl)
	rule := incrementalRuleOf(c.Topo.Facts)
	var order []string // the MultiKueueConfig's clusters, as the manager has them
	if rule.configOrder {
		var err error
		if order, err = c.multiKueueConfigClusters(ctx); err != nil {
			problems = append(problems, err.Error())
		}
	}
	placed, round := false, 0
	var active []string
	for _, e := range wl {
		if e.Cluster != mgr {
			continue
		}
		switch e.Type {
		case observe.ClusterNameSet:
			placed = e.ClusterName() != ""
			if !placed {
				round = 0 // re-dispatch: a new pending period
			}
		case observe.Evicted:
			placed, round = false, 0
		case observe.Nominated:
			if placed || len(e.Values) == 0 {
				continue
			}
			if round == 0 {
				active = c.activeWorkersAt(e.Time)
				if rule.configOrder {
					active = inOrder(active, order)
				}
			}
			round++
			n := min(round*rule.step, len(active))
			want := slices.Clone(active[:n])
			slices.Sort(want)
			got := slices.Clone(e.Values)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				by := "by name"
				if rule.configOrder {
					by = "in spec.clusters order"
				}
				problems = append(problems, fmt.Sprintf("cluster %q: round %d at %s nominated [%s], want the first %d Active workers %s [%s] (%s)",
					mgr, round, rel(e.Time, t0), strings.Join(got, ","), n, by, strings.Join(want, ","), rule.basis))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return c.fail(ctx, &Failure{
		Assertion: "DispatchedIncrementally",
		Object:    t.String(),
		Expected:  "nominations growing by " + rule.String(),
		Problems:  problems,
		Timeline:  c.timeline(wl),
	}, t.refs(c)...)
}

// inOrder is names (a set) ordered as order lists them; names order does
// not list come last, by name.
func inOrder(names, order []string) []string {
	out := make([]string, 0, len(names))
	for _, o := range order {
		if slices.Contains(names, o) {
			out = append(out, o)
		}
	}
	var rest []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// multiKueueConfigClusters reads spec.clusters of the topology's
// MultiKueueConfig from the manager.
func (c *Checker) multiKueueConfigClusters(ctx context.Context) ([]string, error) {
	var cfg kueue.MultiKueueConfig
	name := c.Topo.Spec.Queues.MultiKueueConfig
	if err := c.Topo.Manager.Client.Get(ctx, client.ObjectKey{Name: name}, &cfg); err != nil {
		return nil, fmt.Errorf("cluster %q: read MultiKueueConfig %s for its clusters' order: %v", c.Topo.Manager.Name, name, err)
	}
	return cfg.Spec.Clusters, nil
}
