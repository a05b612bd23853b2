package topology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
)

// gateDefault is Kueue v0.17.0's default of the gates the assertions read,
// to compare a given gate with a cluster that leaves it at its default.
func gateDefault(gate string) (on, known bool) {
	switch gate {
	case "MultiKueueWaitForWorkloadAdmitted":
		return true, true
	}
	return false, false
}

// learnFacts reads Kueue's configuration from the manager and makes the
// Spec say what the cluster runs. A value given explicitly in Options (given,
// before defaults) that the cluster contradicts is an error naming both.
// When the cluster does not show its configuration (NotReadable), the Spec
// keeps the given values and Kueue's defaults, and Facts.Source says so.
func (t *Topology) learnFacts(ctx context.Context, given Options) (read bool, err error) {
	f, err := ReadKueueFacts(ctx, t.Manager, t.Spec.Kueue.Namespace)
	var nr *NotReadable
	switch {
	case errors.As(err, &nr):
		t.Facts = t.Spec.factsFromSpec("not read from the cluster (" + nr.Reason + "); Options and Kueue's defaults used")
		fmt.Fprintf(t.Spec.Progress, "topology: %s\n", t.Facts.Source)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("topology: %w", err)
	}
	if err := checkGiven(given.Kueue, f, t.Manager.Name); err != nil {
		return false, err
	}
	k := &t.Spec.Kueue
	k.Namespace, k.Origin, k.Dispatcher = f.Namespace, f.Origin, f.Dispatcher
	k.Integrations = slices.Clone(f.Integrations)
	k.FeatureGates = maps.Clone(f.FeatureGates)
	k.GCInterval, k.WorkerLostTimeout = ptrTo(f.GCInterval), ptrTo(f.WorkerLostTimeout)
	t.Spec.GCInterval, t.Spec.WorkerLostTimeout = f.GCInterval, f.WorkerLostTimeout
	t.Facts = f
	version := f.Version
	if version == "" {
		version = "unknown"
	}
	fmt.Fprintf(t.Spec.Progress, "topology: Kueue's configuration read from cluster %q: %s (Kueue %s, gcInterval %s, origin %s, dispatcher %s)\n",
		t.Manager.Name, f.Source, version, f.GCInterval, f.Origin, f.Dispatcher)
	return true, nil
}

func ptrTo[T any](v T) *T { return &v }

// checkGiven compares the Kueue options a caller gave explicitly with what
// the cluster runs.
func checkGiven(g KueueOptions, f KueueFacts, cluster string) error {
	var errs []error
	mismatch := func(field string, given, got any) {
		errs = append(errs, fmt.Errorf("topology: Options.Kueue.%s: %v given, but cluster %q runs %v (%s)", field, given, cluster, got, f.Source))
	}
	if g.Namespace != "" && g.Namespace != f.Namespace {
		mismatch("Namespace", g.Namespace, f.Namespace)
	}
	if g.Origin != "" && g.Origin != f.Origin {
		mismatch("Origin", g.Origin, f.Origin)
	}
	if g.Dispatcher != "" && g.Dispatcher != f.Dispatcher {
		mismatch("Dispatcher", g.Dispatcher, f.Dispatcher)
	}
	if g.GCInterval != nil && *g.GCInterval != f.GCInterval {
		mismatch("GCInterval", *g.GCInterval, f.GCInterval)
	}
	if g.WorkerLostTimeout != nil && *g.WorkerLostTimeout != f.WorkerLostTimeout {
		mismatch("WorkerLostTimeout", *g.WorkerLostTimeout, f.WorkerLostTimeout)
	}
	for _, in := range g.Integrations {
		if !slices.Contains(f.Integrations, in) {
			mismatch("Integrations", in+" enabled", f.Integrations)
		}
	}
	for _, gate := range slices.Sorted(maps.Keys(g.FeatureGates)) {
		want := g.FeatureGates[gate]
		got, set := f.FeatureGates[gate]
		if !set {
			def, known := gateDefault(gate)
			if !known {
				continue // the cluster leaves it at a default we do not know: nothing to contradict
			}
			got = def
		}
		if got != want {
			mismatch("FeatureGates["+gate+"]", want, got)
		}
	}
	return errors.Join(errs...)
}

// factsFromSpec describes the Spec as facts, for clusters that do not show
// their configuration.
func (s Spec) factsFromSpec(source string) KueueFacts {
	return KueueFacts{
		Namespace: s.Kueue.Namespace, Origin: s.Kueue.Origin, Dispatcher: s.Kueue.Dispatcher,
		GCInterval: s.GCInterval, WorkerLostTimeout: s.WorkerLostTimeout,
		Integrations: slices.Clone(s.Kueue.Integrations), FeatureGates: maps.Clone(s.Kueue.FeatureGates),
		Source: source,
	}
}

// checkNeeds reports what a connector needs from the manager's Kueue that
// the Kueue read from the cluster does not have: a feature gate, a
// credentials provider. Nothing is checked when the configuration was not
// readable.
func (t *Topology) checkNeeds(needs KueueNeeds, read bool) error {
	if !read {
		return nil
	}
	f := t.Facts
	var missing []string
	for _, gate := range slices.Sorted(maps.Keys(needs.FeatureGates)) {
		want := needs.FeatureGates[gate]
		got, set := f.FeatureGates[gate]
		if !set {
			got, set = gateDefault(gate)
		}
		if !set || got != want {
			missing = append(missing, fmt.Sprintf("feature gate %s=%t", gate, want))
		}
	}
	for _, p := range needs.CredentialsProviders {
		if !slices.ContainsFunc(f.CredentialsProviders, func(q configapi.ClusterProfileCredentialsProvider) bool { return q.Name == p.Name }) {
			missing = append(missing, fmt.Sprintf("multiKueue.clusterProfile.credentialsProviders %q", p.Name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("topology: connector %s needs from the manager's Kueue %s, which cluster %q does not run (%s); install Kueue with them (topology/install applies a connector's needs)",
		t.Spec.Connector.Name(), strings.Join(missing, ", "), t.Manager.Name, f.Source)
}
