// Package capztest stands in for Cluster API and CAPZ on a plain API server,
// so that topology/capz runs end to end without Azure: InstallCRDs installs
// CAPI's Cluster, MachinePool and ClusterClass CRDs (v1.13.5, read from the
// module in the Go module cache, fetched with `go mod download` when
// missing), AKSClusterClass is a ClusterClass shaped like CAPZ's
// aks-clusterclass flavor, and Simulator is a small controller that plays
// CAPI's topology controller and CAPZ's AKS controllers for the fields
// topology/capz reads: MachinePools, conditions, ready replicas and
// kubeconfig Secrets pointing at clusters you choose.
//
// What it does not simulate: admission webhooks (CAPI's defaulting and
// validation), ClusterClass patches and variable validation, infrastructure
// and bootstrap objects, Machines, nodes, and AKS itself.
package capztest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology/capz"
)

// CAPI module and version whose CRDs are installed. It is not in the
// testkit's build list (its Go packages need newer k8s.io modules); only
// its config/crd/bases files are read.
const (
	CAPIModule  = "sigs.k8s.io/cluster-api"
	CAPIVersion = "v1.13.5"
)

// crdFiles are the CRDs topology/capz uses.
func crdFiles() []string {
	return []string{
		"cluster.x-k8s.io_clusters.yaml",
		"cluster.x-k8s.io_machinepools.yaml",
		"cluster.x-k8s.io_clusterclasses.yaml",
	}
}

// CRDs reads CAPI's Cluster, MachinePool and ClusterClass CRDs. The bases
// have no conversion webhook (CAPI's kustomize patches add it): the API
// server serves v1beta1 and v1beta2 without converting, so use v1beta2.
func CRDs(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := modsrc.DirAt(ctx, CAPIModule, CAPIVersion)
	if err != nil {
		return nil, fmt.Errorf("capztest: %w", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range crdFiles() {
		path := filepath.Join(dir, "config", "crd", "bases", f)
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("capztest: %w", err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("capztest: decode %s: %w", path, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// InstallCRDs creates the CRDs of CRDs on the API server of cfg (existing
// ones are left as they are) and waits until each serves v1beta2.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	crds, err := CRDs(ctx)
	if err != nil {
		return err
	}
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return err
	}
	c, err := client.New(rest.CopyConfig(cfg), client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("capztest: %w", err)
	}
	for _, crd := range crds {
		if err := c.Create(ctx, crd.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("capztest: create CRD %s at %s: %w", crd.Name, cfg.Host, err)
		}
	}
	// A fresh client (and REST mapper) each time: listing every kind works
	// once the CRDs are Established and in discovery.
	return poll.Until(ctx, 2*time.Minute, fmt.Sprintf("CAPI CRDs to serve %s at %s", capz.APIVersion, cfg.Host), func(ctx context.Context) error {
		fresh, err := client.New(rest.CopyConfig(cfg), client.Options{})
		if err != nil {
			return err
		}
		for _, gvk := range []struct{ kind string }{{capz.ClusterGVK.Kind}, {capz.MachinePoolGVK.Kind}, {capz.ClusterClassGVK.Kind}} {
			l := newList(capz.ClusterGVK.GroupVersion().WithKind(gvk.kind))
			if err := fresh.List(ctx, l, client.Limit(1)); err != nil {
				return err
			}
		}
		return nil
	})
}
