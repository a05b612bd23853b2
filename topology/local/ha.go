package local

import (
	"fmt"
	"os"
	"time"

	"github.com/multikueue-testkit/testkit/topology"
)

// HA runs a cluster's Kueue as several replicas, each its own Kueue process
// (the binary of Options.Kueue), as a Deployment with replicas > 1 does:
// leader election on Kueue's Lease (c1f6bfd2.kueue.x-k8s.io in Kueue's
// namespace, from the configuration's leaderElection section), the scheduler
// and the leader-only controllers on the leader, caches, queues, webhooks and
// the visibility API (visibility.kueue.x-k8s.io v1beta1 and v1beta2) on every
// replica. Each replica runs with its own host name, "kueue-<i>" (a UTS
// namespace of its own), so that its Lease holder identity names it as a
// pod's names the pod. The cluster's API server reaches the replicas through
// a Service for the webhooks and one for the visibility APIService, each with
// one endpoint per replica (see ha_egress.go). The zero value is off;
// $MKTK_HA sets the default of local.New (see HAFromEnv).
type HA struct {
	// Manager runs the manager's Kueue as Replicas replicas.
	Manager bool
	// Workers runs every worker's Kueue as Replicas replicas.
	Workers bool
	// Replicas per HA cluster, 2 to 5; default 2.
	Replicas int
	// LeaseDuration, RenewDeadline and RetryPeriod are Kueue's
	// leaderElection settings; defaults 6s, 4s and 1s (Kueue's own: 15s,
	// 10s, 2s). A replica killed while it leads is replaced after about
	// LeaseDuration; one stopped gracefully releases the Lease at once.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ProbePeriod is how often the stand-in for the kubelet's readiness
	// probe checks each replica's webhook server and updates the Services'
	// endpoints; default 500ms (Kueue's chart probes every 10s).
	ProbePeriod time.Duration
}

// HA defaults.
const (
	DefaultHAReplicas      = 2
	DefaultHALeaseDuration = 6 * time.Second
	DefaultHARenewDeadline = 4 * time.Second
	DefaultHARetryPeriod   = time.Second
	DefaultHAProbePeriod   = 500 * time.Millisecond
	maxHAReplicas          = 5
)

// HAEnv is the environment variable HAFromEnv reads.
const HAEnv = "MKTK_HA"

// HAFromEnv returns the HA setting that $MKTK_HA asks for: "" or "0" off,
// "1" or "all" the manager and the workers, "manager" or "workers" that role
// only. Anything else is an error naming the variable. local.New uses it
// when Options.HA is the zero value, so any suite runs in HA mode without
// copies: MKTK_HA=1 go test ./examples/...
func HAFromEnv(getenv func(string) string) (HA, error) {
	switch v := getenv(HAEnv); v {
	case "", "0":
		return HA{}, nil
	case "1", "all":
		return HA{Manager: true, Workers: true}, nil
	case "manager":
		return HA{Manager: true}, nil
	case "workers":
		return HA{Workers: true}, nil
	default:
		return HA{}, fmt.Errorf("$%s=%q: want 0, 1, all, manager or workers", HAEnv, v)
	}
}

// haFromEnvUnlessSet is HAFromEnv when o.HA is the zero value.
func haFromEnvUnlessSet(o Options) (Options, error) {
	if o.HA != (HA{}) {
		return o, nil
	}
	ha, err := HAFromEnv(os.Getenv)
	o.HA = ha
	return o, err
}

// replicas is the number of Kueue replicas a cluster of role runs (1 when
// HA is off for it).
func (h HA) replicas(role topology.Role) int {
	if (role == topology.RoleManager && h.Manager) || (role == topology.RoleWorker && h.Workers) {
		if h.Replicas == 0 {
			return DefaultHAReplicas
		}
		return h.Replicas
	}
	return 1
}

func (h HA) on() bool { return h.Manager || h.Workers }

// resolved fills the defaults.
func (h HA) resolved() HA {
	if h.Replicas == 0 {
		h.Replicas = DefaultHAReplicas
	}
	if h.LeaseDuration == 0 {
		h.LeaseDuration = DefaultHALeaseDuration
	}
	if h.RenewDeadline == 0 {
		h.RenewDeadline = DefaultHARenewDeadline
	}
	if h.RetryPeriod == 0 {
		h.RetryPeriod = DefaultHARetryPeriod
	}
	if h.ProbePeriod == 0 {
		h.ProbePeriod = DefaultHAProbePeriod
	}
	return h
}

// validate names the first bad field. client-go's leader election needs
// LeaseDuration > RenewDeadline > 1.2 × RetryPeriod.
func (h HA) validate() error {
	if !h.on() {
		return nil
	}
	r := h.resolved()
	switch {
	case h.Replicas != 0 && (h.Replicas < 2 || h.Replicas > maxHAReplicas):
		return fmt.Errorf("local: Options.HA.Replicas: %d; want 2 to %d", h.Replicas, maxHAReplicas)
	case h.LeaseDuration < 0 || h.RenewDeadline < 0 || h.RetryPeriod < 0 || h.ProbePeriod < 0:
		return fmt.Errorf("local: Options.HA: durations may not be negative (%+v)", h)
	case r.LeaseDuration <= r.RenewDeadline:
		return fmt.Errorf("local: Options.HA.LeaseDuration: %s must be longer than RenewDeadline %s", r.LeaseDuration, r.RenewDeadline)
	case float64(r.RenewDeadline) <= 1.2*float64(r.RetryPeriod):
		return fmt.Errorf("local: Options.HA.RenewDeadline: %s must be longer than 1.2 × RetryPeriod %s", r.RenewDeadline, r.RetryPeriod)
	}
	return nil
}

// leaderElection is the leaderElection section of an HA cluster's Kueue
// configuration: on, Kueue's Lease (the chart's name) in Kueue's namespace,
// with h's durations. Kueue's config.Load turns it into controller-runtime's
// leader election with LeaderElectionReleaseOnCancel.
func (h HA) leaderElection(namespace string) map[string]any {
	h = h.resolved()
	return map[string]any{
		"leaderElect":       true,
		"leaseDuration":     h.LeaseDuration.String(),
		"renewDeadline":     h.RenewDeadline.String(),
		"retryPeriod":       h.RetryPeriod.String(),
		"resourceLock":      "leases",
		"resourceName":      kueueLeaderElectionID,
		"resourceNamespace": namespace,
	}
}

// kueueLeaderElectionID is the name of Kueue's leader Lease (the chart's
// leaderElection.resourceName, Kueue's default).
const kueueLeaderElectionID = "c1f6bfd2.kueue.x-k8s.io"
