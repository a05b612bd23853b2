package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// RevokeTimeout bounds the wait, after Revoke deleted the old
// ServiceAccount, until the worker refuses its token.
const RevokeTimeout = 30 * time.Second

// RotateOptions shape Rotate.
type RotateOptions struct {
	// ServiceAccount is the new identity's name on the worker, in the old
	// one's namespace; default the old name with "-r<N>" (the next N).
	ServiceAccount string
	// Rules are the new identity's rights; default WorkerRules of the
	// topology's integrations, what Connect grants. A test that must see a
	// rotation break MultiKueue gives less.
	Rules []rbacv1.PolicyRule
	// TokenExpiry is the new token's expiry; default 24h.
	TokenExpiry time.Duration
}

// Rotation is a worker's credentials that Rotate replaced: the identity
// MultiKueue used before and the one it uses now, both worker
// ServiceAccounts. Tokens are kept unexported and never printed.
type Rotation struct {
	// Worker is the MultiKueueCluster whose credentials were replaced.
	Worker string
	// Source names what was written on the manager: "Secret ns/name (key
	// kubeconfig)" or "Secret ns/name (key token, read by the secretreader
	// plugin for ClusterProfile ns/name)".
	Source string
	// Old and New are the worker ServiceAccounts, as
	// system:serviceaccount:<namespace>:<name> users.
	Old, New string

	mgr, worker *topology.Cluster
	oldSA       types.NamespacedName
	oldToken    string
	guarded     bool
}

// nextIdentity is the default name of the identity that follows name:
// "<name>-r2", then "<name>-r3", ...
func nextIdentity(name string) string {
	base, n := name, 1
	if m := regexp.MustCompile(`^(.*)-r([0-9]+)$`).FindStringSubmatch(name); m != nil {
		base = m[1]
		n, _ = strconv.Atoi(m[2])
	}
	return fmt.Sprintf("%s-r%d", base, n+1)
}

// Rotate gives MultiKueue a new identity on a worker while it runs: it reads
// the credentials the worker's MultiKueueCluster on mgr uses (its kubeconfig
// Secret, or the token Secret its ClusterProfile's secretreader access
// provider names, in kueueNamespace), asks the worker who they are
// (SelfSubjectReview), creates a new ServiceAccount beside that one with
// its own ClusterRole and binding (the same rights unless o.Rules says
// otherwise, and the same guard when the old one had it) and a bound token,
// and writes that token where the old one was. Kueue watches both kinds of
// Secret and reconnects with it. The old identity stays valid until Revoke,
// as in a rotation with an overlap. The connection's server address and CA
// are left as they were.
func Rotate(ctx context.Context, mgr, worker *topology.Cluster, kueueNamespace string, integrations []string, o RotateOptions) (*Rotation, error) {
	key, profile, err := connectionOf(ctx, mgr, kueueNamespace, worker.Name)
	if err != nil {
		return nil, err
	}
	r := &Rotation{Worker: worker.Name, mgr: mgr, worker: worker}
	write, err := r.locate(ctx, key, profile)
	if err != nil {
		return nil, err
	}
	user, err := whoIs(ctx, worker, r.oldToken)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: who are the credentials in %s: %w", worker.Name, r.Source, err)
	}
	ns, name, ok := strings.Cut(strings.TrimPrefix(user, serviceAccountPrefix), ":")
	if !ok || !strings.HasPrefix(user, serviceAccountPrefix) {
		return nil, fmt.Errorf("cluster %q: the credentials in %s are %q, not a ServiceAccount's: Rotate replaces ServiceAccount tokens only", worker.Name, r.Source, user)
	}
	r.oldSA, r.Old = types.NamespacedName{Namespace: ns, Name: name}, user
	newName := o.ServiceAccount
	if newName == "" {
		newName = nextIdentity(name)
	}
	newSA := types.NamespacedName{Namespace: ns, Name: newName}
	if newSA == r.oldSA {
		return nil, fmt.Errorf("cluster %q: RotateOptions.ServiceAccount: %q is the identity in use (%s); a rotation needs another", worker.Name, newName, user)
	}
	r.New = serviceAccountUser(newSA)
	err = worker.Client.Get(ctx, client.ObjectKey{Name: GuardName(r.oldSA)}, &admissionregistrationv1.ValidatingAdmissionPolicy{})
	switch {
	case err == nil:
		r.guarded = true
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("cluster %q: read the guard of %s: %w", worker.Name, r.Old, err)
	}
	req := topology.ConnectRequest{Manager: mgr, Worker: worker, KueueNamespace: kueueNamespace, Integrations: integrations}
	k := KubeconfigSecret{ServiceAccount: newSA.Name, Namespace: newSA.Namespace, TokenExpiry: o.TokenExpiry, rules: o.Rules}
	token, err := k.workerToken(ctx, req)
	if err != nil {
		return nil, err
	}
	if r.guarded {
		if err := InstallGuard(ctx, worker, newSA, integrations); err != nil {
			return nil, err
		}
	}
	if err := write(ctx, token); err != nil {
		return nil, err
	}
	return r, nil
}

const serviceAccountPrefix = "system:serviceaccount:"

// locate finds where the worker's credentials are on the manager, reads the
// token there, and returns how to write a new one in its place.
func (r *Rotation) locate(ctx context.Context, key client.ObjectKey, profile bool) (func(context.Context, string) error, error) {
	mgr := r.mgr
	switch {
	case !profile:
		r.Source = fmt.Sprintf("Secret %s (key %s)", key, SecretKey)
		cfg, err := r.kubeconfig(ctx, key)
		if err != nil {
			return nil, err
		}
		for _, a := range cfg.AuthInfos {
			if a.Token != "" {
				r.oldToken = a.Token
			}
		}
		if r.oldToken == "" {
			return nil, fmt.Errorf("cluster %q: %s: the kubeconfig holds no bearer token to rotate", mgr.Name, r.Source)
		}
		return func(ctx context.Context, token string) error {
			return r.updateSecret(ctx, key, func(sec *corev1.Secret) error {
				cfg, err := clientcmd.Load(sec.Data[SecretKey])
				if err != nil {
					return fmt.Errorf("not a kubeconfig: %w", err)
				}
				for _, a := range cfg.AuthInfos {
					a.Token = token
				}
				raw, err := clientcmd.Write(*cfg)
				sec.Data[SecretKey] = raw
				return err
			})
		}, nil
	default:
		var cp inventoryv1alpha1.ClusterProfile
		cpKey := key
		if err := mgr.Client.Get(ctx, cpKey, &cp); err != nil {
			return nil, fmt.Errorf("cluster %q: read ClusterProfile %s: %w", mgr.Name, cpKey, err)
		}
		secret, err := tokenSecretOf(cp)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: ClusterProfile %s: %w", mgr.Name, cpKey, err)
		}
		key := client.ObjectKey{Namespace: key.Namespace, Name: secret}
		r.Source = fmt.Sprintf("Secret %s (key %s, read by the %s plugin for ClusterProfile %s)", key, TokenKey, SecretReaderProvider, cpKey)
		var sec corev1.Secret
		if err := mgr.Client.Get(ctx, key, &sec); err != nil {
			return nil, fmt.Errorf("cluster %q: read %s: %w", mgr.Name, r.Source, err)
		}
		if r.oldToken = string(sec.Data[TokenKey]); r.oldToken == "" {
			return nil, fmt.Errorf("cluster %q: %s: no token", mgr.Name, r.Source)
		}
		return func(ctx context.Context, token string) error {
			return r.updateSecret(ctx, key, func(sec *corev1.Secret) error {
				sec.Data[TokenKey] = []byte(token)
				return nil
			})
		}, nil
	}
}

func (r *Rotation) kubeconfig(ctx context.Context, key client.ObjectKey) (*clientcmdapi.Config, error) {
	var sec corev1.Secret
	if err := r.mgr.Client.Get(ctx, key, &sec); err != nil {
		return nil, fmt.Errorf("cluster %q: read %s: %w", r.mgr.Name, r.Source, err)
	}
	cfg, err := clientcmd.Load(sec.Data[SecretKey])
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %s: not a kubeconfig: %w", r.mgr.Name, r.Source, err)
	}
	return cfg, nil
}

func (r *Rotation) updateSecret(ctx context.Context, key client.ObjectKey, edit func(*corev1.Secret) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var sec corev1.Secret
		if err := r.mgr.Client.Get(ctx, key, &sec); err != nil {
			return fmt.Errorf("cluster %q: read %s: %w", r.mgr.Name, r.Source, err)
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		if err := edit(&sec); err != nil {
			return fmt.Errorf("cluster %q: %s: %w", r.mgr.Name, r.Source, err)
		}
		if err := r.mgr.Client.Update(ctx, &sec); err != nil {
			return fmt.Errorf("cluster %q: update %s: %w", r.mgr.Name, r.Source, err)
		}
		return nil
	})
}

// tokenSecretOf is the Secret the secretreader access provider of cp names
// in its exec extension ({"clusterName": <Secret>}).
func tokenSecretOf(cp inventoryv1alpha1.ClusterProfile) (string, error) {
	for _, ap := range cp.Status.AccessProviders {
		if ap.Name != SecretReaderProvider {
			continue
		}
		for _, ext := range ap.Cluster.Extensions {
			if ext.Name != ExecExtension {
				continue
			}
			var cfg struct {
				ClusterName string `json:"clusterName"`
			}
			if err := json.Unmarshal(ext.Extension.Raw, &cfg); err != nil {
				return "", fmt.Errorf("access provider %s: extension %s: %w", ap.Name, ExecExtension, err)
			}
			if cfg.ClusterName != "" {
				return cfg.ClusterName, nil
			}
		}
	}
	return "", fmt.Errorf("no %s access provider naming its token Secret in extension %s", SecretReaderProvider, ExecExtension)
}

// Revoke deletes the old identity on the worker: its ServiceAccount, whose
// tokens the API server then refuses, the ClusterRole and binding Connect
// made for it, and then its guard (no one can act as it any more). It returns once the worker refuses the old
// token (within RevokeTimeout).
func (r *Rotation) Revoke(ctx context.Context) error {
	w := r.worker
	doomed := []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: r.oldSA.Name, Namespace: r.oldSA.Namespace}}}
	// The ClusterRole and binding named after the ServiceAccount are
	// Connect's (and Rotate's) own when the binding binds only it; anything
	// else is someone else's and stays.
	var binding rbacv1.ClusterRoleBinding
	switch err := w.Client.Get(ctx, client.ObjectKey{Name: r.oldSA.Name}, &binding); {
	case err == nil:
		if len(binding.Subjects) == 1 && binding.Subjects[0].Kind == rbacv1.ServiceAccountKind &&
			binding.Subjects[0].Name == r.oldSA.Name && binding.Subjects[0].Namespace == r.oldSA.Namespace {
			doomed = append(doomed, &binding)
			if binding.RoleRef.Kind == "ClusterRole" && binding.RoleRef.Name == r.oldSA.Name {
				doomed = append(doomed, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: r.oldSA.Name}})
			}
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("cluster %q: revoke %s: read ClusterRoleBinding %s: %w", w.Name, r.Old, r.oldSA.Name, err)
	}
	for _, o := range doomed {
		if err := w.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cluster %q: revoke %s: delete %T %s: %w", w.Name, r.Old, o, o.GetName(), err)
		}
	}
	if r.guarded {
		if err := deleteGuard(ctx, w, r.oldSA); err != nil {
			return err
		}
	}
	return poll.Until(ctx, RevokeTimeout, fmt.Sprintf("cluster %q: the API server to refuse the revoked token of %s", w.Name, r.Old), func(ctx context.Context) error {
		return r.OldRefused(ctx)
	})
}

// OldRefused returns nil when the worker refuses the old identity's token
// (401 Unauthorized), else an error saying who it still took it for.
func (r *Rotation) OldRefused(ctx context.Context) error {
	user, err := whoIs(ctx, r.worker, r.oldToken)
	if apierrors.IsUnauthorized(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster %q: the old token of %s: %w (want 401 Unauthorized)", r.worker.Name, r.Old, err)
	}
	return fmt.Errorf("cluster %q: the old token is still taken, as %s", r.worker.Name, user)
}

// whoIs asks worker, at the address the test process uses, who a bearer
// token is (SelfSubjectReview).
func whoIs(ctx context.Context, worker *topology.Cluster, token string) (string, error) {
	if worker.Config == nil {
		return "", errors.New("no rest config for the cluster")
	}
	cfg := rest.AnonymousClientConfig(worker.Config)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	rev, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return rev.Status.UserInfo.Username, nil
}
