package assert_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// multiKueueSecret returns the manager Secret that holds the worker's
// credentials, as its MultiKueueCluster names it, and the key of the token
// or kubeconfig in it: a kubeconfig Secret (key "kubeconfig"), or for a
// ClusterProfile the Secret its secretreader access provider names (key
// "token").
func multiKueueSecret(t *testing.T, ctx context.Context, worker string) (*corev1.Secret, string) {
	t.Helper()
	mgr, ns := env.Topo.Manager, env.Topo.Spec.Kueue.Namespace
	mkc := &kueue.MultiKueueCluster{}
	if err := mgr.Client.Get(ctx, client.ObjectKey{Name: worker}, mkc); err != nil {
		t.Fatal(err)
	}
	name, key := "", connect.SecretKey
	switch src := mkc.Spec.ClusterSource; {
	case src.KubeConfig != nil && src.KubeConfig.LocationType == kueue.SecretLocationType:
		name = src.KubeConfig.Location
	case src.ClusterProfileRef != nil:
		cp := &inventoryv1alpha1.ClusterProfile{}
		if err := mgr.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.ClusterProfileRef.Name}, cp); err != nil {
			t.Fatal(err)
		}
		for _, ap := range cp.Status.AccessProviders {
			for _, ext := range ap.Cluster.Extensions {
				var v struct {
					ClusterName string `json:"clusterName"`
				}
				if ap.Name == connect.SecretReaderProvider && ext.Name == connect.ExecExtension && json.Unmarshal(ext.Extension.Raw, &v) == nil {
					name, key = v.ClusterName, connect.TokenKey
				}
			}
		}
	}
	if name == "" {
		t.Skipf("MultiKueueCluster %s names neither a kubeconfig Secret nor a secretreader ClusterProfile (connector %s); these tests change that Secret", worker, env.Topo.ConnectorName)
	}
	sec := &corev1.Secret{}
	if err := mgr.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		t.Fatal(err)
	}
	return sec, key
}

// sourceOf is where the check reads worker's credentials from, as it says
// in its failures ("Secret kueue-system/multikueue-worker-2").
func sourceOf(t *testing.T, ctx context.Context, w *topology.Cluster) string {
	t.Helper()
	for _, cc := range checker(time.Minute).WorkerCredentials(ctx) {
		if cc.Worker == w.Name {
			return cc.Source
		}
	}
	t.Fatalf("no credentials check for %s", w.Name)
	return ""
}

// setupRecovers waits until SetupActive passes again: the next test starts
// from a healthy topology.
func setupRecovers(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := checker(2 * time.Minute).SetupActive(ctx); err != nil {
		t.Errorf("the setup did not recover: %v", err)
	}
}

// useToken puts a kubeconfig with token into the worker's MultiKueue Secret,
// and puts the original back when the test ends.
func useToken(t *testing.T, ctx context.Context, w *topology.Cluster, token string) {
	t.Helper()
	sec, key := multiKueueSecret(t, ctx, w.Name)
	orig := sec.Data[key]
	kc := []byte(token)
	if key == connect.SecretKey {
		var err error
		if kc, err = connect.TokenKubeconfig(w, token); err != nil {
			t.Fatal(err)
		}
	}
	setSecret := func(data []byte) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Topo.Manager.Client.Get(ctx, client.ObjectKeyFromObject(sec), sec); err != nil {
				return err
			}
			sec.Data[key] = data
			return env.Topo.Manager.Client.Update(ctx, sec)
		})
	}
	if err := setSecret(kc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := setSecret(orig); err != nil {
			t.Fatal(err)
		}
		setupRecovers(t, ctx)
	})
}

// tokenConfig reaches w with a bearer token, as MultiKueue would.
func tokenConfig(w *topology.Cluster, token string) *rest.Config {
	return &rest.Config{Host: w.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: w.Config.CAData}, Timeout: 10 * time.Second}
}

// refused waits until w answers 401 to token: the API server caches
// successful token reviews for a few seconds, so a freshly revoked token can
// still pass.
func refused(t *testing.T, ctx context.Context, w *topology.Cluster, token string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(tokenConfig(w, token))
	if err != nil {
		t.Fatal(err)
	}
	err = poll.Until(ctx, 30*time.Second, fmt.Sprintf("cluster %q to refuse the token", w.Name), func(ctx context.Context) error {
		_, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return fmt.Errorf("answered %v", err)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mustNotLeak checks that no credential reached a message.
func mustNotLeak(t *testing.T, err error, token string) {
	t.Helper()
	if err != nil && (strings.Contains(err.Error(), token) || strings.Contains(err.Error(), token[len(token)-20:])) {
		t.Errorf("the token reached the message:\n%v", err)
	}
}

func TestHealthyCredentialsPass(t *testing.T) {
	ctx := context.Background()
	c := checker(time.Minute)
	assert.For(t, c).SetupActive(ctx)
	for _, w := range env.Topo.Workers {
		assert.For(t, c).ClusterActive(ctx, w.Name)
	}
	checks := c.WorkerCredentials(ctx)
	if len(checks) != len(env.Topo.Workers) {
		t.Fatalf("%d checks for %d workers", len(checks), len(env.Topo.Workers))
	}
	for i, cc := range checks {
		ns := env.Topo.Spec.Kueue.Namespace
		if cc.Worker != env.Topo.Workers[i].Name || cc.User != multiKueueUser() || cc.NotChecked != "" || len(cc.Problems) > 0 ||
			!(strings.HasPrefix(cc.Source, "Secret "+ns+"/") || strings.HasPrefix(cc.Source, "ClusterProfile "+ns+"/")) {
			t.Errorf("worker %d: %+v", i, cc)
		}
	}
	t.Logf("checked: %+v", checks)
}

// TestSetupActiveCatchesATokenTheWorkerRejects gives MultiKueue a token of a
// ServiceAccount that was deleted after the token was issued: the worker
// refuses every request; Kueue v0.17 keeps the MultiKueueCluster Active,
// v0.19 turns it Inactive (ClientConnectionFailed) within seconds. Either
// way both failures name the refused token as the cause.
func TestSetupActiveCatchesATokenTheWorkerRejects(t *testing.T) {
	ctx := context.Background()
	w := env.Topo.Workers[1]
	ns := env.Topo.Spec.Kueue.Namespace
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "mktk-gone", Namespace: ns}}
	if err := w.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := w.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	if err := w.Client.Delete(ctx, sa); err != nil {
		t.Fatal(err)
	}
	token := tr.Status.Token
	refused(t, ctx, w, token)
	src := sourceOf(t, ctx, w)
	useToken(t, ctx, w, token)

	c := checker(5 * time.Second)
	want := []string{`cluster "` + w.Name + `"`, "credentials from " + src + " (",
		"token [redacted] for system:serviceaccount:" + ns + ":mktk-gone", "refused by the worker: 401 Unauthorized"}
	err := c.SetupActive(ctx)
	testtopo.FailsNaming(t, err, append([]string{"SetupActive failed"}, want...)...)
	mustNotLeak(t, err, token)
	err = c.ClusterActive(ctx, w.Name)
	testtopo.FailsNaming(t, err, append([]string{"ClusterActive failed", "MultiKueueCluster " + w.Name}, want...)...)
	mustNotLeak(t, err, token)
	other := c.WorkerCredentials(ctx)[0]
	if other.User != multiKueueUser() || len(other.Problems) > 0 {
		t.Errorf("the healthy worker's check: %+v", other)
	}
}

// TestSetupActiveCatchesAnExpiredToken gives MultiKueue a token for its own
// ServiceAccount, signed with the worker's own service-account key, that
// expired ten minutes ago: genuine in every way but its expiry. (A
// TokenRequest cannot ask for less than ten minutes, so waiting for a real
// one to expire is not an option.) Local topology only: it reads the key
// from the cluster's directory.
func TestSetupActiveCatchesAnExpiredToken(t *testing.T) {
	ctx := context.Background()
	w := env.Topo.Workers[1]
	ns := env.Topo.Spec.Kueue.Namespace
	sa := &corev1.ServiceAccount{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "multikueue-" + env.Topo.Manager.Name}, sa); err != nil {
		t.Fatal(err)
	}
	token := expiredToken(t, w, sa, 10*time.Minute)
	refused(t, ctx, w, token)
	src := sourceOf(t, ctx, w)
	useToken(t, ctx, w, token)

	err := checker(5 * time.Second).SetupActive(ctx)
	testtopo.FailsNaming(t, err, "SetupActive failed", `cluster "`+w.Name+`"`, "credentials from "+src+" (",
		"token [redacted] for "+multiKueueUser()+", expired at", "ago)", "refused by the worker: 401 Unauthorized")
	mustNotLeak(t, err, token)
}

// expiredToken signs, with w's service-account key, a bound-token-shaped JWT
// for sa that expired age ago.
func expiredToken(t *testing.T, w *topology.Cluster, sa *corev1.ServiceAccount, age time.Duration) string {
	t.Helper()
	p, ok := env.Topo.Provider().(*local.Provider)
	if !ok {
		t.Skipf("provider %s: the signing key is only at hand on the local topology", env.Topo.ProviderName)
	}
	raw, err := os.ReadFile(filepath.Join(p.Dir(), w.Name, "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatal("sa.key holds no PEM block")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	issuer := w.Config.Host // the local API servers' --service-account-issuer
	std := jwt.Claims{
		Issuer: issuer, Audience: jwt.Audience{issuer}, Subject: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name,
		IssuedAt: jwt.NewNumericDate(now.Add(-age - time.Hour)), NotBefore: jwt.NewNumericDate(now.Add(-age - time.Hour)), Expiry: jwt.NewNumericDate(now.Add(-age)),
	}
	private := map[string]any{"kubernetes.io": map[string]any{
		"namespace": sa.Namespace, "serviceaccount": map[string]any{"name": sa.Name, "uid": string(sa.UID)},
	}}
	token, err := jwt.Signed(signer).Claims(std).Claims(private).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// TestSetupActiveCatchesAMissingPermission takes "delete" on Workloads away
// from MultiKueue's ClusterRole on a worker.
func TestSetupActiveCatchesAMissingPermission(t *testing.T) {
	ctx := context.Background()
	w := env.Topo.Workers[1]
	sec, key := multiKueueSecret(t, ctx, w.Name)
	src := sourceOf(t, ctx, w)
	role := &rbacv1.ClusterRole{}
	name := "multikueue-" + env.Topo.Manager.Name // the connector's ClusterRole
	if err := w.Client.Get(ctx, client.ObjectKey{Name: name}, role); err != nil {
		t.Fatal(err)
	}
	orig := slices.Clone(role.Rules)
	setRules := func(rules []rbacv1.PolicyRule) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := w.Client.Get(ctx, client.ObjectKey{Name: name}, role); err != nil {
				return err
			}
			role.Rules = rules
			return w.Client.Update(ctx, role)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var cut []rbacv1.PolicyRule
	for _, r := range orig {
		r = *r.DeepCopy()
		if slices.Contains(r.Resources, "workloads") {
			r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == "delete" })
		}
		cut = append(cut, r)
	}
	setRules(cut)
	t.Cleanup(func() {
		setRules(orig)
		setupRecovers(t, ctx)
	})
	// RBAC changes reach the authorizer through an informer: wait until the
	// worker denies it.
	cfg := tokenConfig(w, tokenOf(t, sec, key))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = poll.Until(ctx, 30*time.Second, "the worker to deny deleting Workloads", func(ctx context.Context) error {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: kueue.SchemeGroupVersion.Group, Resource: "workloads", Verb: "delete"}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if r.Status.Allowed {
			return errors.New("still allowed")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := checker(5 * time.Second)
	want := []string{`cluster "` + w.Name + `"`, "credentials from " + src + " (",
		"user " + multiKueueUser() + ", may not (cluster-wide): delete workloads.kueue.x-k8s.io"}
	err = c.SetupActive(ctx)
	testtopo.FailsNaming(t, err, append([]string{"SetupActive failed"}, want...)...)
	if strings.Contains(err.Error(), "may not (cluster-wide): delete workloads.kueue.x-k8s.io, ") {
		t.Errorf("more than the one verb taken away was reported:\n%v", err)
	}
	testtopo.FailsNaming(t, c.ClusterActive(ctx, w.Name), append([]string{"ClusterActive failed"}, want...)...)
}

// tokenOf reads the token in a MultiKueue Secret: under key, or in the
// kubeconfig there.
func tokenOf(t *testing.T, sec *corev1.Secret, key string) string {
	t.Helper()
	if key == connect.TokenKey {
		return string(sec.Data[key])
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(sec.Data[key])
	if err != nil || cfg.BearerToken == "" {
		t.Fatalf("Secret %s/%s: no token in its kubeconfig (%v)", sec.Namespace, sec.Name, err)
	}
	return cfg.BearerToken
}

// TestKubeconfigPathIsReportedNotChecked points a MultiKueueCluster at a
// kubeconfig file (Kueue runs in this process here, so it can read it): the
// test process cannot know what Kueue's filesystem holds, so the check says
// "not checked" and SetupActive passes.
func TestKubeconfigPathIsReportedNotChecked(t *testing.T) {
	ctx := context.Background()
	w := env.Topo.Workers[1]
	sec, key := multiKueueSecret(t, ctx, w.Name)
	if key != connect.SecretKey {
		t.Skipf("MultiKueueCluster %s is not connected through a kubeconfig Secret (connector %s): no kubeconfig to put in a file", w.Name, env.Topo.ConnectorName)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, sec.Data[connect.SecretKey], 0o600); err != nil {
		t.Fatal(err)
	}
	mgr := env.Topo.Manager
	setSource := func(src kueue.ClusterSource) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			mkc := &kueue.MultiKueueCluster{}
			if err := mgr.Client.Get(ctx, client.ObjectKey{Name: w.Name}, mkc); err != nil {
				return err
			}
			mkc.Spec.ClusterSource = src
			return mgr.Client.Update(ctx, mkc)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setSource(kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{Location: path, LocationType: kueue.PathLocationType}})
	t.Cleanup(func() {
		setSource(kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{Location: sec.Name, LocationType: kueue.SecretLocationType}})
		setupRecovers(t, ctx)
	})
	c := checker(time.Minute)
	assert.For(t, c).SetupActive(ctx)
	cc := c.WorkerCredentials(ctx)[1]
	if cc.Worker != w.Name || cc.User != "" || len(cc.Problems) > 0 || !strings.Contains(cc.NotChecked, "path "+path) || cc.Source != "kubeconfig path "+path {
		t.Errorf("got %+v", cc)
	}
	t.Logf("not checked: %s", cc.NotChecked)
}
