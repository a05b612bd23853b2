package install

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// restGetter is the genericclioptions.RESTClientGetter Helm needs, built from
// a cluster's rest.Config in memory: no kubeconfig is written anywhere. The
// raw kubeconfig loader it returns carries only the namespace, never
// credentials; Helm reads nothing else from it.
type restGetter struct {
	cfg       *rest.Config
	namespace string

	mu     sync.Mutex
	disco  discovery.CachedDiscoveryInterface
	mapper meta.RESTMapper
}

// newRESTGetter copies cfg and raises an unset client rate limit (client-go's
// default is 5 QPS) so that applying a chart's hundred objects is not
// throttled.
func newRESTGetter(cfg *rest.Config, namespace string) *restGetter {
	c := rest.CopyConfig(cfg)
	if c.QPS == 0 {
		c.QPS = 50
	}
	if c.Burst == 0 {
		c.Burst = 100
	}
	return &restGetter{cfg: c, namespace: namespace}
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.disco == nil {
		dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(g.cfg))
		if err != nil {
			return nil, err
		}
		g.disco = memory.NewMemCacheClient(dc)
	}
	return g.disco, nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mapper == nil {
		g.mapper = restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(dc), dc, nil)
	}
	return g.mapper, nil
}

// ToRawKubeConfigLoader answers the namespace only; asking it for a client
// config fails (empty config), which Helm does not do: it builds its clients
// from ToRESTConfig.
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(clientcmdapi.Config{}, &clientcmd.ConfigOverrides{
		Context: clientcmdapi.Context{Namespace: g.namespace},
	})
}
