package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createdObject is an object the topology or its connector created.
type createdObject struct {
	cluster *Cluster
	obj     client.Object
}

// recordingClient passes everything through and remembers what Create made.
type recordingClient struct {
	client.Client
	cluster *Cluster
	mu      *sync.Mutex
	out     *[]createdObject
}

func (r recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := r.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	for _, o := range opts {
		if o == client.DryRunAll {
			return nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.out = append(*r.out, createdObject{cluster: r.cluster, obj: obj.DeepCopyObject().(client.Object)})
	return nil
}

// recording runs setup with every cluster's client recording the objects it
// creates, so that Close can remove exactly those from clusters the topology
// does not own. The clients are restored afterwards: a test's own objects
// are never recorded.
func (t *Topology) recording(setup func() error) error {
	var mu sync.Mutex
	var created []createdObject
	orig := make([]client.Client, 0, len(t.Workers)+1)
	for _, c := range t.Clusters() {
		orig = append(orig, c.Client)
		c.Client = recordingClient{Client: c.Client, cluster: c, mu: &mu, out: &created}
	}
	defer func() {
		for i, c := range t.Clusters() {
			c.Client = orig[i]
		}
		t.created = append(t.created, created...)
	}()
	return setup()
}

// deleteCreated deletes the recorded objects, newest first, and waits for
// nothing: namespaces and their contents go in the background.
func (t *Topology) deleteCreated(ctx context.Context) error {
	var errs []error
	for _, c := range slices.Backward(t.created) {
		if err := c.cluster.Client.Delete(ctx, c.obj, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("cluster %q: delete %s %s: %w", c.cluster.Name, kindOf(c.cluster, c.obj), objectName(c.obj), err))
		}
	}
	t.created = nil
	return errors.Join(errs...)
}
