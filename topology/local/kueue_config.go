package local

import (
	"path/filepath"
	"slices"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/multikueue-testkit/testkit/topology"
)

// kueueConfiguration is the Kueue Configuration for spec and the
// connector's needs, which the chart of the Kueue under test turns into the
// configuration its Deployment would run (install.KueueConfig).
//
// Exec credentials plugins (multiKueue.clusterProfile.credentialsProviders)
// that do not set KUBECONFIG get KUBECONFIG=<dir>/<manager>/exec-plugin.kubeconfig:
// the manager as its Kueue reaches it, with Kueue's namespace as the context
// namespace, which the manager's cluster writes before Kueue starts. That is
// the local stand-in for the in-cluster config a plugin sees in the Kueue pod
// (cluster-inventory-api's secretreader reads Secrets with it).
func kueueConfiguration(dir string, spec topology.Spec, needs topology.KueueNeeds) configapi.Configuration {
	cfg := spec.KueueConfiguration(needs)
	if cp := cfg.MultiKueue.ClusterProfile; cp != nil {
		for i := range cp.CredentialsProviders {
			ec := &cp.CredentialsProviders[i].ExecConfig
			if !slices.ContainsFunc(ec.Env, func(e clientcmdapi.ExecEnvVar) bool { return e.Name == "KUBECONFIG" }) {
				ec.Env = append(slices.Clone(ec.Env), clientcmdapi.ExecEnvVar{
					Name: "KUBECONFIG", Value: filepath.Join(dir, spec.ManagerName, execPluginKubeconfig),
				})
			}
		}
	}
	return cfg
}

// execPluginKubeconfig is the file, in the manager's directory, that exec
// credentials plugins get as KUBECONFIG (see kueueConfiguration).
const execPluginKubeconfig = "exec-plugin.kubeconfig"
