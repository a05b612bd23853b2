package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// crdSource is a set of CRD files inside a pinned module.
type crdSource struct {
	module string
	// root is the source tree to read from instead of the pinned module's
	// (the Kueue binary's version or checkout).
	root string
	dir  string
	// files to install; empty means every .yaml in dir.
	files []string
	// storageOnly serves each CRD at its storage version only.
	storageOnly bool
}

// crdSources returns the CRDs a cluster needs (from the roots where they
// are set, else from the pinned modules) for the given integrations and
// connector: Kueue's always, JobSet's and Ray's only when those integrations
// are on, ClusterProfile's only when asked for. Fewer CRDs start faster.
//
// Kueue's CRDs are served at their storage version (v1beta2) only unless
// kueueV1beta1 is set: the base CRDs come without the conversion webhook the
// chart adds, so v1beta1 would be served with conversion None (lossy for
// every field that changed) and nothing here reads it; the second version
// costs the API server about a third of its start-up CPU (the Workload CRD's
// two schemas are 9,500 lines each).
//
// A worker (operators) also gets what its operators' binaries watch beyond
// what Kueue dispatches: KubeRay's main runs the RayCluster, RayJob and
// RayService reconcilers whatever the integration, and exits without their
// CRDs.
func crdSources(integrations []string, clusterProfiles, kueueV1beta1, operators bool, roots crdRoots) []crdSource {
	srcs := []crdSource{{module: modsrc.Kueue, root: roots.kueue, dir: "config/components/crd/bases", storageOnly: !kueueV1beta1}}
	var ray []string
	for _, in := range integrations {
		switch in {
		case topology.IntegrationJobSet:
			srcs = append(srcs, crdSource{module: modsrc.JobSet, root: roots.jobSet, dir: "config/components/crd/bases", files: []string{"jobset.x-k8s.io_jobsets.yaml"}})
		case topology.IntegrationRayJob:
			ray = append(ray, "ray.io_rayjobs.yaml", "ray.io_rayclusters.yaml")
		case topology.IntegrationRayCluster:
			ray = append(ray, "ray.io_rayclusters.yaml")
		case topology.IntegrationRayService:
			ray = append(ray, "ray.io_rayservices.yaml", "ray.io_rayclusters.yaml")
		}
	}
	if len(ray) > 0 {
		if operators {
			ray = append(ray, "ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml", "ray.io_rayservices.yaml")
		}
		sort.Strings(ray)
		srcs = append(srcs, crdSource{module: modsrc.KubeRay, root: roots.kubeRay, dir: "config/crd/bases", files: uniq(ray)})
	}
	var kubeflow []string
	for _, in := range integrations {
		if kind, ok := kubeflowScheme(in); ok {
			kubeflow = append(kubeflow, "kubeflow.org_"+strings.ToLower(kind)+"s.yaml")
		}
	}
	if len(kubeflow) > 0 {
		srcs = append(srcs, crdSource{module: modsrc.TrainingOperator, root: roots.trainingOperator, dir: "manifests/base/crds", files: kubeflow})
	}
	if slices.Contains(integrations, topology.IntegrationMPIJob) {
		srcs = append(srcs, crdSource{module: modsrc.MPIOperator, root: roots.mpiOperator, dir: "manifests/base", files: []string{"kubeflow.org_mpijobs.yaml"}})
	}
	if slices.Contains(integrations, topology.IntegrationAppWrapper) {
		srcs = append(srcs, crdSource{module: modsrc.AppWrapper, root: roots.appWrapper, dir: "config/crd/bases", files: []string{"workload.codeflare.dev_appwrappers.yaml"}})
	}
	if slices.Contains(integrations, topology.IntegrationLeaderWorkerSet) {
		// Both: the controller (v0.9.0) also runs a DisaggregatedSet
		// reconciler, and exits when its cache cannot sync (2 min).
		srcs = append(srcs, crdSource{module: modsrc.LWS, root: roots.lws, dir: "config/crd/bases", files: []string{"disaggregatedset.x-k8s.io_disaggregatedsets.yaml", "leaderworkerset.x-k8s.io_leaderworkersets.yaml"}})
	}
	if slices.Contains(integrations, topology.IntegrationTrainJob) {
		srcs = append(srcs, crdSource{module: modsrc.Trainer, root: roots.trainer, dir: "manifests/base/crds", files: []string{
			"trainer.kubeflow.org_clustertrainingruntimes.yaml", "trainer.kubeflow.org_trainingruntimes.yaml", "trainer.kubeflow.org_trainjobs.yaml"}})
	}
	if clusterProfiles {
		srcs = append(srcs, clusterProfileCRDSource())
	}
	return srcs
}

// crdRoots are the source trees of the binaries a topology runs, whose CRDs
// it installs; "" means the pinned module's (in-process controllers).
type crdRoots struct {
	kueue, jobSet, kubeRay, trainingOperator, mpiOperator, appWrapper, lws, trainer string
}

// clusterProfileCRDSource is the ClusterProfile CRD of the pinned
// cluster-inventory-api.
func clusterProfileCRDSource() crdSource {
	return crdSource{module: modsrc.ClusterInventory, dir: "config/crd/bases", files: []string{"multicluster.x-k8s.io_clusterprofiles.yaml"}}
}

// clusterProfileCRDName is the ClusterProfile CRD's name, the one Kueue looks
// up at start (pkg/config.ConfigureClusterProfileCache).
const clusterProfileCRDName = "clusterprofiles.multicluster.x-k8s.io"

// ensureClusterProfileCRD installs the ClusterProfile CRD on the cluster
// behind cfg unless it is there, and waits (up to timeout) until it is served. A Kueue that
// starts with the MultiKueueClusterProfile gate on watches ClusterProfiles:
// without the CRD its MultiKueueCluster controller never syncs and the
// manager exits after the cache sync timeout. The gate is process-global, so
// a topology that did not ask for ClusterProfiles can still start its Kueue
// with it on (another topology of the process turned it on): this keeps such
// a Kueue working.
func ensureClusterProfileCRD(ctx context.Context, cluster string, cfg *rest.Config, timeout time.Duration) error {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("cluster %q: client: %w", cluster, err)
	}
	err = cl.Get(ctx, client.ObjectKey{Name: clusterProfileCRDName}, &apiextensionsv1.CustomResourceDefinition{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster %q: get CRD %s: %w", cluster, clusterProfileCRDName, err)
	}
	crds, err := loadCRDs(ctx, []crdSource{clusterProfileCRDSource()})
	if err != nil {
		return err
	}
	return installCRDsWithin(ctx, &topology.Cluster{Name: cluster, Config: cfg, Client: cl}, crds, timeout)
}

func uniq(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// loadCRDs reads and decodes the CRDs of srcs from the module cache.
func loadCRDs(ctx context.Context, srcs []crdSource) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, src := range srcs {
		root := src.root
		if root == "" {
			var err error
			if root, err = modsrc.Dir(ctx, src.module); err != nil {
				return nil, err
			}
		}
		dir := filepath.Join(root, src.dir)
		files := src.files
		if len(files) == 0 {
			entries, err := os.ReadDir(dir)
			if err != nil {
				return nil, fmt.Errorf("CRDs of %s: %w", src.module, err)
			}
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".yaml") && !strings.HasPrefix(e.Name(), "_") {
					files = append(files, e.Name())
				}
			}
		}
		for _, f := range files {
			crds, err := decodeCRDs(filepath.Join(dir, f))
			if err != nil {
				return nil, err
			}
			if src.storageOnly {
				for _, crd := range crds {
					storageVersionOnly(crd)
				}
			}
			out = append(out, crds...)
		}
	}
	return out, nil
}

// storageVersionOnly drops every version of crd but its storage version
// (a CRD without one is left as it is).
func storageVersionOnly(crd *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{v}
			return
		}
	}
}

func decodeCRDs(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		if crd.Kind == "CustomResourceDefinition" {
			out = append(out, crd)
		}
	}
}

// installCRDs creates crds on c and waits until each is Established and
// every served version is in discovery: Established comes first, and a
// client that builds its REST mapper in between (Kueue's manager does) would
// fail with "no matches for kind".
func installCRDs(ctx context.Context, c *topology.Cluster, crds []*apiextensionsv1.CustomResourceDefinition) error {
	return installCRDsWithin(ctx, c, crds, startTimeout)
}

// installCRDsWithin is installCRDs with each wait bounded by timeout
// (Options.StartTimeout).
func installCRDsWithin(ctx context.Context, c *topology.Cluster, crds []*apiextensionsv1.CustomResourceDefinition, timeout time.Duration) error {
	for _, crd := range crds {
		obj := crd.DeepCopy()
		if err := c.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster %q: create CRD %s: %w", c.Name, crd.Name, err)
		}
	}
	err := poll.Until(ctx, timeout, fmt.Sprintf("cluster %q: %d CRDs to be Established", c.Name, len(crds)), func(ctx context.Context) error {
		for _, crd := range crds {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
				return err
			}
			established := false
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return fmt.Errorf("CRD %s is not Established", crd.Name)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("cluster %q: discovery client: %w", c.Name, err)
	}
	return poll.Until(ctx, timeout, fmt.Sprintf("cluster %q: %d CRDs to be served in discovery", c.Name, len(crds)), func(context.Context) error {
		return servedInDiscovery(dc, crds)
	})
}

// servedInDiscovery returns an error naming the first served CRD version
// that discovery does not list yet.
func servedInDiscovery(dc discovery.DiscoveryInterface, crds []*apiextensionsv1.CustomResourceDefinition) error {
	listed := map[string]map[string]bool{} // group/version -> plural names
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := crd.Spec.Group + "/" + v.Name
			if listed[gv] == nil {
				res, err := dc.ServerResourcesForGroupVersion(gv)
				if err != nil {
					return fmt.Errorf("discovery of %s: %w", gv, err)
				}
				listed[gv] = map[string]bool{}
				for _, r := range res.APIResources {
					listed[gv][r.Name] = true
				}
			}
			if !listed[gv][crd.Spec.Names.Plural] {
				return fmt.Errorf("%s %s not in discovery yet", gv, crd.Spec.Names.Plural)
			}
		}
	}
	return nil
}
