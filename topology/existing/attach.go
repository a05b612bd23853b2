package existing

import (
	"context"
	"time"

	"github.com/multikueue-testkit/testkit/topology"
)

// AttachCluster makes a topology.Cluster of one cluster exactly as New does in
// either mode: a client from src.Config with topology.NewScheme's types (or
// src.Client), then a wait of up to timeout for Kueue's CRDs to answer
// (MultiKueueClusters on the manager, Workloads on a worker). It is for
// providers that make clusters and then attach them (topology/kind).
func AttachCluster(ctx context.Context, src Cluster, role topology.Role, timeout time.Duration) (*topology.Cluster, error) {
	scheme, err := topology.NewScheme()
	if err != nil {
		return nil, err
	}
	return attach(ctx, src, role, scheme, timeout)
}
