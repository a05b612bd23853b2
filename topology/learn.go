package topology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
//
// A provider that hands a Configuration over (KueueConfigurationGiver) is
// taken at its word instead of the cluster.
func (t *Topology) learnFacts(ctx context.Context, given Options) (read bool, err error) {
	f, err := t.readFacts(ctx)
	var nr *NotReadable
	switch {
	case errors.As(err, &nr):
		t.Facts = t.assumeFacts(ctx, given, nr.Reason)
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
	t.Facts = f
	version := f.Version
	if version == "" {
		version = "unknown"
	}
	fmt.Fprintf(t.Spec.Progress, "topology: the configuration of cluster %q's Kueue, from %s (Kueue %s, gcInterval %s, origin %s, dispatcher %s)\n",
		t.Manager.Name, f.Source, version, f.GCInterval, f.Origin, f.Dispatcher)
	return true, nil
}

func ptrTo[T any](v T) *T { return &v }

// readFacts reads Kueue's configuration: the one the provider hands over,
// else the manager's.
func (t *Topology) readFacts(ctx context.Context) (KueueFacts, error) {
	if g, ok := t.provider.(KueueConfigurationGiver); ok {
		if cfg, source := g.KueueConfiguration(); cfg != nil {
			f, err := FactsFromConfigurationObject(cfg, source)
			if err != nil {
				return KueueFacts{}, err
			}
			f.NominationPolicy, f.NominationPolicyRead, f.NominationPolicyNote = nominationPolicy(ctx, t.Manager)
			return f, nil
		}
	}
	return ReadKueueFacts(ctx, t.Manager, t.Spec.Kueue.Namespace)
}

// assumeFacts describes a manager whose Kueue configuration is not readable:
// the values given in Options, Kueue's defaults for the rest, each of those
// marked in Facts.Assumed; integrations not given are assumed from the
// CRDs the manager serves (batch/job, plus every integration whose CRD is
// there), and Spec.Kueue.Integrations follows.
func (t *Topology) assumeFacts(ctx context.Context, given Options, reason string) KueueFacts {
	mgr, g := t.Manager.Name, given.Kueue
	def := fmt.Sprintf("Kueue's default assumed; Kueue's configuration is not readable on cluster %q (%s), give it in topology.Options.Kueue or hand the Configuration over", mgr, reason)
	assumed := map[string]string{}
	for fact, isGiven := range map[string]bool{
		FactNamespace: g.Namespace != "", FactOrigin: g.Origin != "", FactDispatcher: g.Dispatcher != "",
		FactGCInterval: g.GCInterval != nil, FactWorkerLostTimeout: g.WorkerLostTimeout != nil,
	} {
		if !isGiven {
			assumed[fact] = def
		}
	}
	if len(g.FeatureGates) == 0 {
		assumed[FactFeatureGates] = fmt.Sprintf("Kueue's default gates assumed; Kueue's configuration is not readable on cluster %q (%s)", mgr, reason)
	}
	if len(g.Integrations) == 0 {
		ins, note := servedIntegrations(ctx, t.Manager)
		t.Spec.Kueue.Integrations = ins
		assumed[FactIntegrations] = fmt.Sprintf("assumed from %s; Kueue's configuration is not readable on cluster %q (%s)", note, mgr, reason)
	}
	names := slices.Sorted(maps.Keys(assumed))
	f := t.Spec.factsFromSpec(fmt.Sprintf("not read from the cluster (%s); Options and Kueue's defaults used, assumed: %s", reason, strings.Join(names, ", ")))
	f.Assumed = assumed
	f.NominationPolicy, f.NominationPolicyRead, f.NominationPolicyNote = nominationPolicy(ctx, t.Manager)
	return f
}

// crdIntegrations are the Kueue integrations whose job kind is a custom
// resource, named "<group>/<kind in lower case>" as Kueue names them; the
// CRD of each is "<kind>s.<group>".
func crdIntegrations() []string {
	return []string{
		IntegrationJobSet, IntegrationRayJob, IntegrationRayCluster, IntegrationRayService,
		IntegrationMPIJob, IntegrationPyTorchJob, IntegrationTFJob, IntegrationXGBoostJob,
		IntegrationPaddleJob, IntegrationJAXJob, IntegrationTrainJob,
		IntegrationAppWrapper, IntegrationLeaderWorkerSet,
	}
}

// servedIntegrations is batch/job plus the integrations whose CRD c serves,
// and a note on how that was found.
func servedIntegrations(ctx context.Context, c *Cluster) ([]string, string) {
	out := []string{IntegrationBatchJob}
	// Names only: Kueue's CRDs alone are megabytes of schema.
	crds := &metav1.PartialObjectMetadataList{}
	crds.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
	if err := c.Client.List(ctx, crds); err != nil {
		return out, fmt.Sprintf("nothing (cluster %q: CRDs not listed: %v), so batch/job only", c.Name, err)
	}
	served := map[string]bool{}
	for _, crd := range crds.Items {
		served[crd.Name] = true
	}
	for _, in := range crdIntegrations() {
		group, kind, _ := strings.Cut(in, "/")
		if served[kind+"s."+group] {
			out = append(out, in)
		}
	}
	return out, fmt.Sprintf("the CRDs cluster %q serves (batch/job always): %s", c.Name, strings.Join(out, ", "))
}

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
		GCInterval: s.GCInterval(), WorkerLostTimeout: s.WorkerLostTimeout(),
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
