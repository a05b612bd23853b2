package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	validatingadmissionpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/component-base/compatibility"
	"k8s.io/component-base/version"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	generatedopenapi "sigs.k8s.io/kueue/apis/visibility/openapi"
	visibilityv1beta1 "sigs.k8s.io/kueue/apis/visibility/v1beta1"
	visibilityv1beta2 "sigs.k8s.io/kueue/apis/visibility/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/visibility/storage"
)

// visibilityRunnable is one replica's visibility API server
// (visibility.kueue.x-k8s.io v1beta2 and v1beta1), served from that
// replica's own queue manager. It is Kueue v0.17.0's
// pkg/visibility/server.go rebuilt from its exported parts — storage.NewStorage,
// the visibility API types, Kueue's generated OpenAPI — because
// CreateAndStartVisibilityServer cannot run several times in one process:
//
//   - it reads its serving certificate from the hard-coded directory
//     /visibility (server.go:65, `certDir = "/visibility"`, used at lines
//     109-112);
//   - it takes the kubeconfig for delegated authentication, authorization and
//     the core API from the process-global --kubeconfig flag
//     (server.go:127, `flag.Lookup("kubeconfig")`), so replicas of different
//     clusters cannot each have their own.
//
// Same as Kueue's: the API group, versions and storage; the generic API
// server with delegated authentication and authorization (the cluster's
// client CA and request-header settings read from the
// extension-apiserver-authentication ConfigMap, SubjectAccessReviews for
// every request); the admission plugins Kueue disables; OpenAPI v2 and v3.
// Different: the certificate is ours (signed by the cluster's CA, for
// 127.0.0.1 and the Service's DNS name), the kubeconfig is the replica's own
// file, it listens on 127.0.0.1 only, and API priority and fairness is off
// (the local kube-apiserver runs without it too). Kueue's TLS options
// (TLSOptions gate) are not applied.
type visibilityRunnable struct {
	r      *replica
	server *genericapiserver.GenericAPIServer

	mu      sync.Mutex
	cancel  context.CancelFunc
	stopped bool
	done    chan struct{}
}

// visibilityScheme is pkg/visibility's scheme, built per server.
func visibilityScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := visibilityv1beta2.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := visibilityv1beta1.AddToScheme(s); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s, nil
}

// newVisibilityRunnable builds the server; it listens once the manager
// starts it.
func newVisibilityRunnable(r *replica, queues *qcache.Manager, _ *configapi.Configuration) (_ *visibilityRunnable, err error) {
	scheme, err := visibilityScheme()
	if err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)

	// newVisibilityServerConfig
	c := genericapiserver.NewRecommendedConfig(codecs)
	ver := strings.Split(version.Get().String(), "-")[0]
	c.EffectiveVersion = compatibility.NewEffectiveVersionFromString(ver, "", "")
	c.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer(scheme))
	c.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer(scheme))
	c.OpenAPIConfig.Info.Title = "Kueue visibility-server"
	c.OpenAPIV3Config.Info.Title = "Kueue visibility-server"
	c.OpenAPIConfig.Info.Version = ver
	c.OpenAPIV3Config.Info.Version = ver
	c.EnableMetrics = true

	// applyVisibilityServerOptions
	o := genericoptions.NewRecommendedOptions("", codecs.LegacyCodec(visibilityv1beta2.SchemeGroupVersion, visibilityv1beta1.SchemeGroupVersion))
	o.Etcd = nil
	o.SecureServing.ServerCert.CertKey.CertFile = r.visibilityCert
	o.SecureServing.ServerCert.CertKey.KeyFile = r.visibilityKey
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.visibilityPort)))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	o.SecureServing.Listener = l
	o.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	o.SecureServing.BindPort = r.visibilityPort
	o.Authentication.RemoteKubeConfigFile = r.authKubeconfig
	o.Authorization.RemoteKubeConfigFile = r.authKubeconfig
	o.CoreAPI.CoreAPIKubeconfigPath = r.authKubeconfig
	o.Admission.DisablePlugins = []string{
		validatingadmissionpolicy.PluginName, resourcequota.PluginName,
		validatingwebhook.PluginName, mutatingwebhook.PluginName,
	}
	o.Features.EnablePriorityAndFairness = false
	if err := o.ApplyTo(c); err != nil {
		return nil, err
	}

	server, err := c.Complete().New("visibility-server", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	// install
	group := genericapiserver.NewDefaultAPIGroupInfo(visibilityv1beta2.GroupVersion.Group, scheme, runtime.NewParameterCodec(scheme), codecs)
	st := storage.NewStorage(queues)
	group.VersionedResourcesStorageMap[visibilityv1beta2.GroupVersion.Version] = st
	group.VersionedResourcesStorageMap[visibilityv1beta1.GroupVersion.Version] = st
	group.PrioritizedVersions = []schema.GroupVersion{visibilityv1beta2.GroupVersion, visibilityv1beta1.GroupVersion}
	if err := server.InstallAPIGroups(&group); err != nil {
		return nil, err
	}
	return &visibilityRunnable{r: r, server: server, done: make(chan struct{})}, nil
}

// Start runs the server until the manager stops or stop is called.
func (v *visibilityRunnable) Start(ctx context.Context) error {
	defer close(v.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v.mu.Lock()
	if v.stopped {
		v.mu.Unlock()
		return nil
	}
	v.cancel = cancel
	v.mu.Unlock()
	err := v.server.PrepareRun().RunWithContext(ctx)
	v.mu.Lock()
	stopped := v.stopped
	v.mu.Unlock()
	if err != nil && !stopped && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("cluster %q: replica %s: visibility server: %w", v.r.cluster, v.r.name, err)
	}
	return nil
}

// NeedLeaderElection: every replica serves the visibility API.
func (*visibilityRunnable) NeedLeaderElection() bool { return false }

// stop ends the server only; the replica's manager keeps running.
func (v *visibilityRunnable) stop() error {
	v.mu.Lock()
	if v.stopped {
		v.mu.Unlock()
		return nil
	}
	v.stopped = true
	cancel := v.cancel
	v.mu.Unlock()
	if cancel == nil {
		return nil // never started; Start returns at once
	}
	cancel()
	<-v.done
	return nil
}
