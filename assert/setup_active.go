package assert

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
)

// SetupActive checks that the MultiKueue setup works: every MultiKueueCluster
// is Active=True with reason Active, the AdmissionCheck is Active, the
// ClusterQueue is Active on every cluster, and every worker has the mirrored
// namespaces and LocalQueues, and every worker accepts the credentials
// MultiKueue uses for it with every permission MultiKueue needs
// (WorkerCredentials; credentials it cannot check from here pass). It waits
// up to Timeout; on failure it lists each object that is not ready with its
// condition's reason and message, and each refusal.
//
// It does not check that workloads can actually run; ExactlyOnceAdmitted does.
func (c *Checker) SetupActive(ctx context.Context) error {
	var creds throttle[[]string]
	err := poll.Until(ctx, c.timeout(), "the MultiKueue setup to be Active", func(ctx context.Context) error { return c.setupProblems(ctx, &creds) })
	if err == nil {
		return nil
	}
	problems := []string{err.Error()}
	var te *poll.TimeoutError
	if errors.As(err, &te) && te.Last != nil {
		problems = strings.Split(te.Last.Error(), "; ")
	}
	return c.fail(ctx, &Failure{
		Assertion: "SetupActive",
		Object:    fmt.Sprintf("topology (%s, %s)", c.Topo.ProviderName, c.Topo.ConnectorName),
		Expected:  "every MultiKueueCluster Active=True/Active, the AdmissionCheck and every ClusterQueue Active, namespaces and LocalQueues mirrored on every worker, and every worker accepting the credentials MultiKueue uses, with every permission it needs",
		Problems:  problems,
	}, c.setupRefs()...)
}

func (c *Checker) setupProblems(ctx context.Context, creds *throttle[[]string]) error {
	var problems []string
	if err := c.Topo.ActiveProblems(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	for _, w := range c.Topo.Workers {
		mkc := &kueue.MultiKueueCluster{}
		if err := c.Topo.Manager.Client.Get(ctx, client.ObjectKey{Name: w.Name}, mkc); err == nil {
			for _, cond := range mkc.Status.Conditions {
				if cond.Type == kueue.MultiKueueClusterActive && cond.Status == "True" && cond.Reason != "Active" {
					problems = append(problems, fmt.Sprintf("cluster %q MultiKueueCluster %s: Active=True but reason=%s", c.Topo.Manager.Name, w.Name, cond.Reason))
				}
			}
		}
		for _, ns := range c.Topo.Spec.Queues.Namespaces {
			if err := w.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
				problems = append(problems, fmt.Sprintf("cluster %q Namespace %s: %v", w.Name, ns, err))
				continue
			}
			lq := &kueue.LocalQueue{}
			if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Topo.Spec.Queues.LocalQueue}, lq); err != nil {
				problems = append(problems, fmt.Sprintf("cluster %q LocalQueue %s/%s: %v", w.Name, ns, c.Topo.Spec.Queues.LocalQueue, err))
			}
		}
	}
	problems = append(problems, c.credentialProblems(ctx, creds)...)
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}
