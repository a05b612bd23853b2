package topology

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
)

// KueueNeeds is what a Connector needs from the manager's Kueue before Kueue
// starts: a provider that runs or installs Kueue applies it (the local
// provider in-process, topology/install through the chart's values), and a
// provider that attaches a running Kueue checks it against what it reads.
type KueueNeeds struct {
	// ClusterProfileCRD asks for the ClusterProfile CRD
	// (multicluster.x-k8s.io/v1alpha1) on the manager. Kueue sets up its
	// ClusterProfile controller only when the CRD exists at start.
	ClusterProfileCRD bool
	// FeatureGates are Kueue feature gates the connector depends on, for
	// example MultiKueueClusterProfile=true.
	FeatureGates map[string]bool
	// CredentialsProviders go to multiKueue.clusterProfile.credentialsProviders.
	CredentialsProviders []configapi.ClusterProfileCredentialsProvider
}

// For returns the needs a cluster of role must be given: all of them on
// the manager, none on a worker. The needs are the manager's Kueue's (it
// reads ClusterProfiles and runs the credentials plugins); a worker given
// the ClusterProfile gate without the CRD would exit after its cache-sync
// timeout, so providers that install per cluster (topology/install, kind,
// capz) give workers neither.
func (n KueueNeeds) For(role Role) KueueNeeds {
	if role != RoleManager {
		return KueueNeeds{}
	}
	return n
}

// merge adds o's needs to n.
func (n KueueNeeds) merge(o KueueNeeds) KueueNeeds {
	n.ClusterProfileCRD = n.ClusterProfileCRD || o.ClusterProfileCRD
	if len(o.FeatureGates) > 0 {
		gates := make(map[string]bool, len(n.FeatureGates)+len(o.FeatureGates))
		for k, v := range n.FeatureGates {
			gates[k] = v
		}
		for k, v := range o.FeatureGates {
			gates[k] = v
		}
		n.FeatureGates = gates
	}
	n.CredentialsProviders = append(append([]configapi.ClusterProfileCredentialsProvider(nil), n.CredentialsProviders...), o.CredentialsProviders...)
	return n
}

// KueueConfiguration is the Kueue Configuration (config.kueue.x-k8s.io/v1beta2)
// that every cluster of a topology with this Spec runs: the local provider
// loads it in-process and topology/install renders it into the chart's
// managerConfig, so both run the same configuration. needs are the
// connector's (see Connector.KueueNeeds); its feature gates are merged over
// Spec.Kueue.FeatureGates.
func (s Spec) KueueConfiguration(needs KueueNeeds) configapi.Configuration {
	k := s.Kueue
	needs = KueueNeeds{FeatureGates: k.FeatureGates}.merge(needs)
	cfg := configapi.Configuration{
		TypeMeta:               metav1.TypeMeta{APIVersion: configapi.SchemeGroupVersion.String(), Kind: "Configuration"},
		Namespace:              ptr.To(k.Namespace),
		InternalCertManagement: &configapi.InternalCertManagement{Enable: ptr.To(false)},
		Integrations:           &configapi.Integrations{Frameworks: append([]string(nil), k.Integrations...)},
		MultiKueue: &configapi.MultiKueue{
			GCInterval:        &metav1.Duration{Duration: s.GCInterval()},
			Origin:            ptr.To(k.Origin),
			WorkerLostTimeout: &metav1.Duration{Duration: s.WorkerLostTimeout()},
			DispatcherName:    ptr.To(k.Dispatcher),
		},
		FeatureGates: needs.FeatureGates,
	}
	if len(needs.CredentialsProviders) > 0 {
		cfg.MultiKueue.ClusterProfile = &configapi.ClusterProfile{CredentialsProviders: needs.CredentialsProviders}
	}
	return cfg
}
