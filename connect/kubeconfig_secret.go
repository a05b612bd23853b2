package connect

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/topology"
)

// KubeconfigSecret is the baseline connector, as the Kueue docs describe it:
// on the worker a ServiceAccount with a least-privilege ClusterRole and a
// bound token; on the manager a Secret (key "kubeconfig") in Kueue's namespace
// holding a kubeconfig with the worker's CA inline and that token. The
// kubeconfig passes Kueue's validation: no tokenFile, no insecure TLS, no exec.
type KubeconfigSecret struct {
	// ServiceAccount is the worker ServiceAccount's name; default
	// "multikueue-<manager>".
	ServiceAccount string
	// Namespace on the worker for the ServiceAccount; default Kueue's.
	Namespace string
	// TokenExpiry is the TokenRequest's expiry; default 24h.
	TokenExpiry time.Duration
	// SecretName returns the manager Secret's name for a worker; default
	// "multikueue-<worker>".
	SecretName func(worker string) string
	// Guard installs InstallGuard on each worker for the ServiceAccount:
	// MultiKueue may then update or delete only the Workloads and job
	// objects it created (kueue.x-k8s.io/multikueue-origin label). The local
	// topology turns it on by default.
	Guard bool

	// rules replace WorkerRules for the ServiceAccount's ClusterRole when
	// non-nil (Rotate's RotateOptions.Rules).
	rules []rbacv1.PolicyRule
}

var _ topology.Connector = KubeconfigSecret{}

// Name implements topology.Connector.
func (KubeconfigSecret) Name() string { return "kubeconfig-secret" }

// KueueNeeds implements topology.Connector: a kubeconfig Secret needs nothing
// beyond Kueue's defaults.
func (KubeconfigSecret) KueueNeeds(context.Context) (topology.KueueNeeds, error) {
	return topology.KueueNeeds{}, nil
}

// SecretKey is the key Kueue reads the kubeconfig from.
const SecretKey = "kubeconfig"

// Connect implements topology.Connector.
func (k KubeconfigSecret) Connect(ctx context.Context, req topology.ConnectRequest) (kueue.ClusterSource, error) {
	token, err := k.workerToken(ctx, req)
	if err != nil {
		return kueue.ClusterSource{}, err
	}
	if k.Guard {
		if err := InstallGuard(ctx, req.Worker, k.serviceAccount(req), req.Integrations); err != nil {
			return kueue.ClusterSource{}, err
		}
	}
	kc, err := TokenKubeconfig(req.Worker, token)
	if err != nil {
		return kueue.ClusterSource{}, fmt.Errorf("cluster %q: build kubeconfig: %w", req.Worker.Name, err)
	}
	name := "multikueue-" + req.Worker.Name
	if k.SecretName != nil {
		name = k.SecretName(req.Worker.Name)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: req.KueueNamespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, req.Manager.Client, sec, func() error {
		sec.Data = map[string][]byte{SecretKey: kc}
		return nil
	}); err != nil {
		return kueue.ClusterSource{}, fmt.Errorf("cluster %q: write Secret %s/%s: %w", req.Manager.Name, req.KueueNamespace, name, err)
	}
	return kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{Location: name, LocationType: kueue.SecretLocationType}}, nil
}

// workerToken creates the ServiceAccount, ClusterRole and binding on the
// worker and returns a fresh bound token for the ServiceAccount.
func (k KubeconfigSecret) workerToken(ctx context.Context, req topology.ConnectRequest) (string, error) {
	w := req.Worker
	key := k.serviceAccount(req)
	ns, sa := key.Namespace, key.Name
	for _, obj := range []struct {
		o      client.Object
		mutate func()
	}{
		{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, func() {}},
		{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}, func() {}},
	} {
		if err := ensure(ctx, w, obj.o, obj.mutate); err != nil {
			return "", err
		}
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa}}
	rules := k.rules
	if rules == nil {
		rules = WorkerRules(req.Integrations)
	}
	if err := ensure(ctx, w, role, func() { role.Rules = rules }); err != nil {
		return "", err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa}}
	if err := ensure(ctx, w, binding, func() {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sa}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	}); err != nil {
		return "", err
	}
	expiry := k.TokenExpiry
	if expiry == 0 {
		expiry = 24 * time.Hour
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(expiry / time.Second))}}
	saObj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}
	if err := w.Client.SubResource("token").Create(ctx, saObj, tr); err != nil {
		return "", fmt.Errorf("cluster %q: TokenRequest for ServiceAccount %s/%s: %w", w.Name, ns, sa, err)
	}
	if tr.Status.Token == "" {
		return "", fmt.Errorf("cluster %q: TokenRequest for ServiceAccount %s/%s returned no token", w.Name, ns, sa)
	}
	return tr.Status.Token, nil
}

// serviceAccount is the worker ServiceAccount MultiKueue acts as.
func (k KubeconfigSecret) serviceAccount(req topology.ConnectRequest) types.NamespacedName {
	key := types.NamespacedName{Namespace: k.Namespace, Name: k.ServiceAccount}
	if key.Namespace == "" {
		key.Namespace = req.KueueNamespace
	}
	if key.Name == "" {
		key.Name = "multikueue-" + req.Manager.Name
	}
	return key
}

// TokenKubeconfig builds a kubeconfig for c's API server, at the address the
// manager uses (Cluster.ServerForManager), with its CA inline and a bearer
// token: the form Kueue accepts.
func TokenKubeconfig(c *topology.Cluster, token string) ([]byte, error) {
	ca := c.Config.CAData
	if len(ca) == 0 {
		return nil, fmt.Errorf("cluster %q: rest config has no inline CA data; Kueue rejects CA files and insecure TLS", c.Name)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.ServerForManager(), CertificateAuthorityData: ca}
	cfg.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	cfg.CurrentContext = c.Name
	return clientcmd.Write(*cfg)
}

func ensure(ctx context.Context, c *topology.Cluster, obj client.Object, mutate func()) error {
	if _, err := controllerutil.CreateOrUpdate(ctx, c.Client, obj, func() error { mutate(); return nil }); err != nil {
		return fmt.Errorf("cluster %q: apply %T %s: %w", c.Name, obj, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}
