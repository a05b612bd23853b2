package connect

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"k8s.io/client-go/util/retry"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology"
)

// ClusterProfile connects a worker through the ClusterProfile API
// (multicluster.x-k8s.io/v1alpha1), Kueue's alpha MultiKueueClusterProfile
// path, wired as Kueue v0.17.0's own e2e test wires it:
//
//   - on the worker, the same ServiceAccount, least-privilege ClusterRole
//     (WorkerRules) and bound token as KubeconfigSecret (and the same Guard);
//   - on the manager, in Kueue's namespace, a Secret (key "token") holding
//     that token, and a ClusterProfile whose status.accessProviders carry the
//     worker's server (Cluster.ServerForManager), its CA and the
//     client.authentication.k8s.io/exec extension {"clusterName": <Secret>};
//   - the MultiKueueCluster gets spec.clusterSource.clusterProfileRef.
//
// Kueue never reads a kubeconfig on this path: it builds the rest config from
// the ClusterProfile and execs the credentials plugin named in
// multiKueue.clusterProfile.credentialsProviders for the token. KueueNeeds
// asks for that provider, the MultiKueueClusterProfile gate and the
// ClusterProfile CRD, which must exist before Kueue starts.
//
// The plugin is cluster-inventory-api's plugins/secretreader/cmd/plugin (provider
// "secretreader"), the one Kueue's e2e test uses. It reads the Secret from the
// manager named by its KUBECONFIG, in that kubeconfig's namespace: the local
// topology points KUBECONFIG at the manager as its in-process Kueue sees it,
// in Kueue's namespace, the way a plugin in the Kueue pod uses the in-cluster
// config. It prints the token only on stdout, to Kueue, as the exec
// credential protocol wants; the ClusterProfile holds no secret.
//
// Why that plugin rather than re-executing the test binary as the plugin:
// the upstream plugin is what a real ClusterProfile deployment runs, no
// library code takes over a process at init, and no token logic is copied.
// Its cost is one build per machine, cached like kube-apiserver (times in
// docs/performance.md, "ClusterProfile plugin"), and Kueue execs it only
// when it builds a client. Set PluginCommand (or $MKTK_SECRETREADER_PLUGIN) to skip the build.
//
// Feature gates are process-global in Go: a local topology with this
// connector turns MultiKueueClusterProfile on for every in-process Kueue
// started after it in the same test binary. That only adds the ClusterProfile
// path (the local provider then also installs the ClusterProfile CRD on every
// cluster whose Kueue starts with the gate on); kubeconfig Secrets keep
// working.
type ClusterProfile struct {
	// ServiceAccount is the worker ServiceAccount's name; default
	// "multikueue-<manager>".
	ServiceAccount string
	// Namespace on the worker for the ServiceAccount; default Kueue's.
	Namespace string
	// TokenExpiry is the TokenRequest's expiry; default 24h.
	TokenExpiry time.Duration
	// ProfileName returns the ClusterProfile's name for a worker; default the
	// worker's name.
	ProfileName func(worker string) string
	// SecretName returns the name of the manager Secret holding the worker's
	// token; default "multikueue-<worker>-token".
	SecretName func(worker string) string
	// ClusterManager is the ClusterProfile's spec.clusterManager.name (and
	// its x-k8s.io/cluster-manager label); default "multikueue-testkit".
	ClusterManager string
	// PluginCommand is the secretreader plugin's path as Kueue executes it
	// (for example /plugins/secretreader-plugin in a Kueue pod). Default:
	// $MKTK_SECRETREADER_PLUGIN, else built from the pinned
	// cluster-inventory-api into the assets cache.
	PluginCommand string
	// Guard installs InstallGuard on each worker, as KubeconfigSecret.Guard.
	Guard bool
}

var _ topology.Connector = ClusterProfile{}

// Credentials provider and plugin protocol constants.
const (
	// ClusterProfileGate is the name of Kueue's feature gate for
	// ClusterProfiles in MultiKueue (alpha, off by default from v0.15 to
	// v0.19), which KueueNeeds turns on.
	ClusterProfileGate = "MultiKueueClusterProfile"
	// SecretReaderProvider is the access provider and credentials provider
	// name the secretreader plugin is registered under.
	SecretReaderProvider = "secretreader"
	// TokenKey is the Secret key the secretreader plugin reads.
	TokenKey = "token"
	// ExecExtension is the cluster extension whose content client-go hands
	// to the exec plugin as spec.cluster.config.
	ExecExtension = "client.authentication.k8s.io/exec"
	// ExecAPIVersion is the exec credential API the plugin speaks.
	ExecAPIVersion = "client.authentication.k8s.io/v1"
	// DefaultClusterManager is the default spec.clusterManager.name.
	DefaultClusterManager = "multikueue-testkit"
)

// Name implements topology.Connector.
func (ClusterProfile) Name() string { return "cluster-profile" }

// KueueNeeds implements topology.Connector: the ClusterProfile CRD, the
// MultiKueueClusterProfile gate and the secretreader credentials provider
// (building the plugin on first use unless PluginCommand is set).
func (c ClusterProfile) KueueNeeds(ctx context.Context) (topology.KueueNeeds, error) {
	cmd := c.PluginCommand
	if cmd == "" {
		var err error
		// A build is rare and takes seconds: say so where a person sees it.
		if cmd, err = assets.SecretReader(ctx, assets.Options{Progress: os.Stderr}); err != nil {
			return topology.KueueNeeds{}, fmt.Errorf("ClusterProfile.PluginCommand: %w", err)
		}
	}
	return topology.KueueNeeds{
		ClusterProfileCRD: true,
		FeatureGates:      map[string]bool{ClusterProfileGate: true},
		CredentialsProviders: []configapi.ClusterProfileCredentialsProvider{{
			Name: SecretReaderProvider,
			ExecConfig: api.ExecConfig{
				APIVersion:         ExecAPIVersion,
				Command:            cmd,
				ProvideClusterInfo: true,
				InteractiveMode:    api.NeverExecInteractiveMode,
			},
		}},
	}, nil
}

// Connect implements topology.Connector.
func (c ClusterProfile) Connect(ctx context.Context, req topology.ConnectRequest) (kueue.ClusterSource, error) {
	if req.Worker.Config == nil || len(req.Worker.Config.CAData) == 0 {
		return kueue.ClusterSource{}, fmt.Errorf("cluster %q: rest config has no inline CA data (Config.CAData) for the ClusterProfile's certificate-authority-data", req.Worker.Name)
	}
	worker := KubeconfigSecret{ServiceAccount: c.ServiceAccount, Namespace: c.Namespace, TokenExpiry: c.TokenExpiry}
	token, err := worker.workerToken(ctx, req)
	if err != nil {
		return kueue.ClusterSource{}, err
	}
	if c.Guard {
		if err := InstallGuard(ctx, req.Worker, worker.serviceAccount(req), req.Integrations); err != nil {
			return kueue.ClusterSource{}, err
		}
	}
	w, mgr, ns := req.Worker, req.Manager, req.KueueNamespace
	secretName := "multikueue-" + w.Name + "-token"
	if c.SecretName != nil {
		secretName = c.SecretName(w.Name)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns}}
	if _, err := controllerutil.CreateOrUpdate(ctx, mgr.Client, sec, func() error {
		sec.Data = map[string][]byte{TokenKey: []byte(token)}
		return nil
	}); err != nil {
		return kueue.ClusterSource{}, fmt.Errorf("cluster %q: write Secret %s/%s: %w", mgr.Name, ns, secretName, err)
	}

	profileName := w.Name
	if c.ProfileName != nil {
		profileName = c.ProfileName(w.Name)
	}
	manager := c.ClusterManager
	if manager == "" {
		manager = DefaultClusterManager
	}
	cp := &inventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: profileName, Namespace: ns}}
	if _, err := controllerutil.CreateOrUpdate(ctx, mgr.Client, cp, func() error {
		if cp.Labels == nil {
			cp.Labels = map[string]string{}
		}
		cp.Labels[inventoryv1alpha1.LabelClusterManagerKey] = manager
		cp.Spec.DisplayName = w.Name
		cp.Spec.ClusterManager.Name = manager
		return nil
	}); err != nil {
		return kueue.ClusterSource{}, fmt.Errorf("cluster %q: apply ClusterProfile %s/%s: %w", mgr.Name, ns, profileName, err)
	}
	access, err := AccessProvider(w, secretName)
	if err != nil {
		return kueue.ClusterSource{}, err
	}
	// Status is a subresource: the create above dropped it.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := mgr.Client.Get(ctx, client.ObjectKeyFromObject(cp), cp); err != nil {
			return err
		}
		cp.Status.AccessProviders = []inventoryv1alpha1.AccessProvider{access}
		return mgr.Client.Status().Update(ctx, cp)
	}); err != nil {
		return kueue.ClusterSource{}, fmt.Errorf("cluster %q: write status.accessProviders of ClusterProfile %s/%s: %w", mgr.Name, ns, profileName, err)
	}
	return kueue.ClusterSource{ClusterProfileRef: &kueue.ClusterProfileReference{Name: profileName}}, nil
}

// AccessProvider is the secretreader access provider for c: its API server at
// the address the manager uses, its CA inline, and the exec extension that
// tells the plugin which Secret (in its own namespace) holds the token.
func AccessProvider(c *topology.Cluster, secretName string) (inventoryv1alpha1.AccessProvider, error) {
	ext, err := json.Marshal(map[string]string{"clusterName": secretName})
	if err != nil {
		return inventoryv1alpha1.AccessProvider{}, err
	}
	return inventoryv1alpha1.AccessProvider{
		Name: SecretReaderProvider,
		Cluster: clientcmdv1.Cluster{
			Server:                   c.ServerForManager(),
			CertificateAuthorityData: c.Config.CAData,
			Extensions:               []clientcmdv1.NamedExtension{{Name: ExecExtension, Extension: runtime.RawExtension{Raw: ext}}},
		},
	}, nil
}
