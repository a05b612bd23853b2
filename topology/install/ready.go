package install

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// readyClient is a client for the waits, with its own scheme (core, apps,
// discovery, coordination, apiextensions) so that any Cluster.Client works.
func readyClient(c *topology.Cluster) (client.Client, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	cl, err := client.New(rest.CopyConfig(c.Config), client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("install: cluster %q: client: %w", c.Name, err)
	}
	return cl, nil
}

// waiter waits for a component's parts on one cluster, one progress line each.
type waiter struct {
	cluster  *topology.Cluster
	client   client.Client
	timeout  time.Duration
	progress io.Writer
}

func (w *waiter) wait(ctx context.Context, what string, check func(context.Context) error) error {
	start := time.Now()
	full := fmt.Sprintf("%s on cluster %q", what, w.cluster.Name)
	if err := poll.UntilEvery(ctx, w.timeout, 500*time.Millisecond, full, check); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	fmt.Fprintf(w.progress, "install: cluster %q: %s (%s)\n", w.cluster.Name, what, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// deploymentAvailable waits for the Deployment's Available condition with
// every updated replica available (a rollout finished).
func (w *waiter) deploymentAvailable(ctx context.Context, namespace, name string) error {
	return w.wait(ctx, fmt.Sprintf("Deployment %s/%s Available", namespace, name), func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := w.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil {
			return err
		}
		return deploymentState(d)
	})
}

// deploymentState is nil when the Deployment's current generation is rolled
// out and Available, else what is missing.
func deploymentState(d *appsv1.Deployment) error {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	if s.ObservedGeneration < d.Generation {
		return fmt.Errorf("generation %d not observed yet (observed %d)", d.Generation, s.ObservedGeneration)
	}
	var avail *appsv1.DeploymentCondition
	for i := range s.Conditions {
		if s.Conditions[i].Type == appsv1.DeploymentAvailable {
			avail = &s.Conditions[i]
		}
	}
	if avail == nil || avail.Status != corev1.ConditionTrue || s.UpdatedReplicas < want || s.AvailableReplicas < want {
		reason := "no Available condition"
		if avail != nil {
			reason = fmt.Sprintf("Available=%s %s: %s", avail.Status, avail.Reason, avail.Message)
		}
		return fmt.Errorf("%d/%d replicas updated, %d available; %s", s.UpdatedReplicas, want, s.AvailableReplicas, reason)
	}
	return nil
}

// serviceEndpointsReady waits until an EndpointSlice of the Service has a
// ready endpoint: the API server can then reach the webhook server.
func (w *waiter) serviceEndpointsReady(ctx context.Context, namespace, name string) error {
	return w.wait(ctx, fmt.Sprintf("Service %s/%s has a ready endpoint", namespace, name), func(ctx context.Context) error {
		var slices discoveryv1.EndpointSliceList
		if err := w.client.List(ctx, &slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
			return err
		}
		return endpointsState(slices.Items)
	})
}

// endpointsState is nil when some endpoint is ready.
func endpointsState(slices []discoveryv1.EndpointSlice) error {
	n := 0
	for _, s := range slices {
		for _, e := range s.Endpoints {
			n++
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				return nil
			}
		}
	}
	return fmt.Errorf("%d EndpointSlices, %d endpoints, none ready", len(slices), n)
}

// leaseHeld waits until the leader-election Lease has a holder: a replica
// won the election and started its controllers.
func (w *waiter) leaseHeld(ctx context.Context, namespace, name string) error {
	return w.wait(ctx, fmt.Sprintf("Lease %s/%s has a holder", namespace, name), func(ctx context.Context) error {
		l := &coordinationv1.Lease{}
		if err := w.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, l); err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holderIdentity")
		}
		return nil
	})
}

// crdEstablished waits for a CRD's Established condition.
func (w *waiter) crdEstablished(ctx context.Context, name string) error {
	return w.wait(ctx, fmt.Sprintf("CustomResourceDefinition %s Established", name), func(ctx context.Context) error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := w.client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not Established")
	})
}

// workloadsReady waits for every Deployment of a release and for the
// endpoints of every Service whose name says it serves webhooks.
func (w *waiter) workloadsReady(ctx context.Context, rel *Release) error {
	for _, o := range rel.Objects {
		if o.GetKind() == "Deployment" && o.GetAPIVersion() == "apps/v1" {
			if err := w.deploymentAvailable(ctx, namespaceOf(o, rel.Namespace), o.GetName()); err != nil {
				return err
			}
		}
	}
	for _, o := range rel.Objects {
		if o.GetKind() == "Service" && o.GetAPIVersion() == "v1" && strings.Contains(o.GetName(), "webhook") {
			if err := w.serviceEndpointsReady(ctx, namespaceOf(o, rel.Namespace), o.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}

func namespaceOf(o client.Object, def string) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns
	}
	return def
}
