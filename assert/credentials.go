package assert

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/observe"
	"github.com/multikueue-testkit/testkit/topology"
)

// CredentialCheck is what checking the credentials MultiKueue uses for one
// worker found.
type CredentialCheck struct {
	// Worker is the MultiKueueCluster's name.
	Worker string
	// Source is where the credentials were read from, e.g. "Secret
	// kueue-system/multikueue-worker-1" or "ClusterProfile
	// kueue-system/worker-1".
	Source string
	// User is who the worker says the credentials are (SelfSubjectReview);
	// empty when it refused them or they were not checked.
	User string
	// NotChecked says why the credentials could not be checked from the
	// test process (a kubeconfig path inside Kueue's pod, an exec plugin not
	// installed here); empty when they were.
	NotChecked string
	// Problems are the refusals, each naming the worker, the source and
	// what was refused. Credentials never appear in them.
	Problems []string
}

// credentialTimeout bounds each request made with MultiKueue's credentials.
const credentialTimeout = 10 * time.Second

// WorkerCredentials checks, for every worker, the credentials MultiKueue uses
// to reach it, read from the manager the way Kueue reads them (the
// MultiKueueCluster's spec.clusterSource: a kubeconfig Secret in Kueue's
// namespace, key "kubeconfig"; a ClusterProfile's access providers with the
// credentials providers of Kueue's configuration, through
// cluster-inventory-api's exec plugin support). With them it asks the worker
// who they are (SelfSubjectReview) and, cluster-wide, whether they may do
// everything MultiKueue does: every verb of connect.WorkerRules on Workloads
// and on the job kinds in use (SelfSubjectAccessReview).
//
// Not checked (and said so in NotChecked): a kubeconfig given as a path,
// which only Kueue's own filesystem has, and a ClusterProfile whose exec
// plugin is not installed where the test runs. Nor does it check what a
// ValidatingAdmissionPolicy or webhook on the worker would deny.
//
// Kueue's own Active condition does not cover this: Kueue v0.17.0 kept a
// MultiKueueCluster Active=True for 90 s with a token the worker rejected.
func (c *Checker) WorkerCredentials(ctx context.Context) []CredentialCheck {
	out := make([]CredentialCheck, 0, len(c.Topo.Workers))
	for _, w := range c.Topo.Workers {
		out = append(out, c.checkCredentials(ctx, w.Name, true))
	}
	return out
}

// credentialRecheck is how often a waiting assertion checks credentials
// again: a check costs a review per verb and worker.
const credentialRecheck = time.Second

// throttle runs a check at most once per credentialRecheck and returns the
// last result in between. The zero value is ready; one per wait.
type throttle[T any] struct {
	last   time.Time
	result T
}

func (th *throttle[T]) do(check func() T) T {
	if th.last.IsZero() || time.Since(th.last) >= credentialRecheck {
		th.result, th.last = check(), time.Now()
	}
	return th.result
}

// credentialProblems returns the Problems of every worker's check, checked
// again at most once per credentialRecheck through th.
func (c *Checker) credentialProblems(ctx context.Context, th *throttle[[]string]) []string {
	return th.do(func() []string {
		var out []string
		for _, cc := range c.WorkerCredentials(ctx) {
			out = append(out, cc.Problems...)
		}
		return out
	})
}

// clusterCredentialsError is nil when the MultiKueueCluster name's
// credentials pass (or cannot be checked), else the problems joined;
// checked again at most once per credentialRecheck through th.
func (c *Checker) clusterCredentialsError(ctx context.Context, name string, th *throttle[error]) error {
	return th.do(func() error {
		cc := c.checkCredentials(ctx, name, true)
		if len(cc.Problems) == 0 {
			return nil
		}
		return errors.New(strings.Join(cc.Problems, ", and "))
	})
}

// multiKueueIdentities returns, per worker, the user MultiKueue's
// credentials authenticate as: its writes there are MultiKueue's.
func (c *Checker) multiKueueIdentities(ctx context.Context) []observe.Identity {
	var out []observe.Identity
	for _, w := range c.Topo.Workers {
		if cc := c.checkCredentials(ctx, w.Name, false); cc.User != "" {
			out = append(out, observe.Identity{Cluster: w.Name, User: cc.User, Role: topology.WriterMultiKueue})
		}
	}
	return out
}

// checkCredentials checks the credentials of the MultiKueueCluster name;
// the permissions too when perms is set.
func (c *Checker) checkCredentials(ctx context.Context, name string, perms bool) CredentialCheck {
	cc := CredentialCheck{Worker: name}
	cfg, err := c.readCredentials(ctx, &cc)
	if err != nil {
		cc.Problems = append(cc.Problems, err.Error())
		return cc
	}
	if cfg == nil {
		return cc // not checked
	}
	// An exec plugin's token is known only once a request carries it.
	sent := &sentToken{}
	cfg.Wrap(sent.wrap)
	who := fmt.Sprintf("cluster %q: MultiKueue's credentials from %s (%s)", name, cc.Source, describeCredentials(cfg, time.Now()))
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		cc.Problems = append(cc.Problems, fmt.Sprintf("%s: cannot build a client: %v", who, err))
		return cc
	}
	defer hc.CloseIdleConnections()
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		cc.Problems = append(cc.Problems, fmt.Sprintf("%s: cannot build a client: %v", who, err))
		return cc
	}
	ssr, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if tok := sent.get(); cfg.ExecProvider != nil && tok != "" {
		who = fmt.Sprintf("cluster %q: MultiKueue's credentials from %s (exec plugin %s gave %s)", name, cc.Source, cfg.ExecProvider.Command, describeToken(tok, time.Now()))
	}
	switch {
	case apierrors.IsUnauthorized(err):
		cc.Problems = append(cc.Problems, fmt.Sprintf("%s were refused by the worker: 401 Unauthorized", who))
		return cc
	case err != nil:
		cc.Problems = append(cc.Problems, fmt.Sprintf("%s: asking the worker at %s who they are failed: %v", who, cfg.Host, err))
		return cc
	}
	cc.User = ssr.Status.UserInfo.Username
	if !perms {
		return cc
	}
	var refused []string
	for _, rule := range connect.WorkerRules(c.Topo.Spec.Kueue.Integrations) {
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				res, sub, _ := strings.Cut(r, "/")
				for _, verb := range rule.Verbs {
					ra := &authorizationv1.ResourceAttributes{Group: g, Resource: res, Subresource: sub, Verb: verb}
					review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
						&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}, metav1.CreateOptions{})
					if err != nil {
						cc.Problems = append(cc.Problems, fmt.Sprintf("%s: asking whether they may %s failed: %v", who, resourceVerb(ra), err))
						return cc
					}
					if !review.Status.Allowed {
						refused = append(refused, resourceVerb(ra))
					}
				}
			}
		}
	}
	if len(refused) > 0 {
		cc.Problems = append(cc.Problems, fmt.Sprintf("%s, user %s, may not (cluster-wide): %s%s", who, cc.User, strings.Join(refused, ", "), c.assumed(topology.FactIntegrations)))
	}
	return cc
}

// resourceVerb reads "delete workloads.kueue.x-k8s.io" or "get jobs.batch/status".
func resourceVerb(ra *authorizationv1.ResourceAttributes) string {
	s := ra.Verb + " " + ra.Resource
	if ra.Group != "" {
		s += "." + ra.Group
	}
	if ra.Subresource != "" {
		s += "/" + ra.Subresource
	}
	return s
}

// readCredentials reads the MultiKueueCluster name's clusterSource and
// returns a REST config with the credentials it names, pointed at the
// worker's address as the test reaches it. It sets cc.Source, and
// cc.NotChecked with a nil config when they cannot be used from here.
func (c *Checker) readCredentials(ctx context.Context, cc *CredentialCheck) (*rest.Config, error) {
	mgr, ns := c.Topo.Manager, c.Topo.Spec.Kueue.Namespace
	mkc := &kueue.MultiKueueCluster{}
	if err := mgr.Client.Get(ctx, client.ObjectKey{Name: cc.Worker}, mkc); err != nil {
		return nil, fmt.Errorf("cluster %q: MultiKueueCluster %s: %w", mgr.Name, cc.Worker, err)
	}
	src := mkc.Spec.ClusterSource
	var cfg *rest.Config
	switch {
	case src.KubeConfig != nil && src.KubeConfig.LocationType == kueue.PathLocationType:
		cc.Source = "kubeconfig path " + src.KubeConfig.Location
		cc.NotChecked = fmt.Sprintf("cluster %q: MultiKueueCluster %s reads its kubeconfig from the path %s in Kueue's own filesystem, which the test cannot read", mgr.Name, cc.Worker, src.KubeConfig.Location)
		return nil, nil
	case src.KubeConfig != nil:
		cc.Source = fmt.Sprintf("Secret %s/%s", ns, src.KubeConfig.Location)
		sec := &corev1.Secret{}
		if err := mgr.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.KubeConfig.Location}, sec); err != nil {
			return nil, fmt.Errorf("cluster %q: MultiKueueCluster %s: %s: %w", mgr.Name, cc.Worker, cc.Source, err)
		}
		raw, ok := sec.Data[kueue.MultiKueueConfigSecretKey]
		if !ok {
			return nil, fmt.Errorf("cluster %q: MultiKueueCluster %s: %s has no key %q", mgr.Name, cc.Worker, cc.Source, kueue.MultiKueueConfigSecretKey)
		}
		var err error
		if cfg, err = clientcmd.RESTConfigFromKubeConfig(raw); err != nil {
			// The parse error may quote the content: say only where.
			return nil, fmt.Errorf("cluster %q: MultiKueueCluster %s: %s, key %q, is not a usable kubeconfig", mgr.Name, cc.Worker, cc.Source, kueue.MultiKueueConfigSecretKey)
		}
	case src.ClusterProfileRef != nil:
		cc.Source = fmt.Sprintf("ClusterProfile %s/%s", ns, src.ClusterProfileRef.Name)
		var err error
		if cfg, err = c.clusterProfileConfig(ctx, cc, src.ClusterProfileRef.Name); cfg == nil || err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("cluster %q: MultiKueueCluster %s: spec.clusterSource names neither a kubeConfig nor a clusterProfileRef", mgr.Name, cc.Worker)
	}
	cfg = c.reachable(cfg)
	cfg.Timeout = credentialTimeout
	// A check makes a few dozen reviews at once; client-go's default
	// limit (5 per second) would spread them over seconds.
	cfg.QPS, cfg.Burst = -1, 0
	return cfg, nil
}

// clusterProfileConfig builds the REST config Kueue builds for a
// ClusterProfile: cluster-inventory-api's credentials package with the
// credentials providers of Kueue's configuration (as the topology's
// connector sets them). A nil config with cc.NotChecked set when the exec
// plugin is not installed here.
func (c *Checker) clusterProfileConfig(ctx context.Context, cc *CredentialCheck, profile string) (*rest.Config, error) {
	mgr, ns := c.Topo.Manager, c.Topo.Spec.Kueue.Namespace
	cp := &inventoryv1alpha1.ClusterProfile{}
	if err := mgr.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: profile}, cp); err != nil {
		return nil, fmt.Errorf("cluster %q: MultiKueueCluster %s: %s: %w", mgr.Name, cc.Worker, cc.Source, err)
	}
	// The providers as Kueue runs them (read from the cluster: the local
	// topology adds KUBECONFIG to the plugin's env), else as the connector
	// asks for them.
	cps := c.Topo.Facts.CredentialsProviders
	if len(cps) == 0 && c.Topo.Spec.Connector == nil {
		cc.NotChecked = fmt.Sprintf("cluster %q: MultiKueueCluster %s: %s: Kueue's credentials providers are not known (not read from the cluster, no connector)", mgr.Name, cc.Worker, cc.Source)
		return nil, nil
	}
	if len(cps) == 0 {
		needs, err := c.Topo.Spec.Connector.KueueNeeds(ctx)
		if err != nil {
			return nil, fmt.Errorf("connector %s: %w", c.Topo.Spec.Connector.Name(), err)
		}
		if kcfg := c.Topo.Spec.KueueConfiguration(needs); kcfg.MultiKueue != nil && kcfg.MultiKueue.ClusterProfile != nil {
			cps = kcfg.MultiKueue.ClusterProfile.CredentialsProviders
		}
	}
	var providers []access.Provider
	for _, p := range cps {
		providers = append(providers, access.Provider{Name: p.Name, ExecConfig: &p.ExecConfig})
	}
	cfg, err := access.New(providers).BuildConfigFromCP(cp)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: MultiKueueCluster %s: %s with Kueue's credentials providers: %w", mgr.Name, cc.Worker, cc.Source, err)
	}
	if cmd := cfg.ExecProvider.Command; cmd != "" {
		if _, err := exec.LookPath(cmd); err != nil {
			cc.NotChecked = fmt.Sprintf("cluster %q: MultiKueueCluster %s: %s: the credentials plugin %q that Kueue runs is not installed where the test runs", mgr.Name, cc.Worker, cc.Source, cmd)
			return nil, nil
		}
	}
	// client-go keeps exec credentials per plugin configuration for the
	// life of the process (an in-process Kueue shares that cache): a
	// variable of its own makes every check run the plugin afresh, so a
	// credential changed since is seen. One small cache entry per check.
	cfg.ExecProvider.Env = append(slices.Clone(cfg.ExecProvider.Env),
		clientcmdapi.ExecEnvVar{Name: "MKTK_CREDENTIALS_CHECK", Value: strconv.FormatInt(time.Now().UnixNano(), 10)})
	return cfg, nil
}

// reachable points cfg at the worker's address as the test reaches it when
// it names the address the manager's Kueue uses (Cluster.ManagerServer, a
// kind node name for instance), verifying the serving certificate for that
// name.
func (c *Checker) reachable(cfg *rest.Config) *rest.Config {
	for _, w := range c.Topo.Workers {
		if w.ManagerServer == "" || cfg.Host != w.ManagerServer || w.Config.Host == cfg.Host {
			continue
		}
		if u, err := url.Parse(w.ManagerServer); err == nil && cfg.TLSClientConfig.ServerName == "" {
			cfg.TLSClientConfig.ServerName = u.Hostname()
		}
		cfg.Host = w.Config.Host
	}
	return cfg
}

// sentToken keeps the bearer token of the last request it saw, to describe
// what an exec plugin returned (describeToken); it is never printed.
type sentToken struct {
	mu    sync.Mutex
	token string
}

func (s *sentToken) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok {
			s.mu.Lock()
			s.token = tok
			s.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (s *sentToken) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// describeCredentials says what cfg authenticates with, never the secret
// itself: a bearer token's subject and expiry (read from its claims without
// verifying them: only the worker can), a client certificate's subject, an
// exec plugin's command.
func describeCredentials(cfg *rest.Config, now time.Time) string {
	switch {
	case cfg.BearerToken != "":
		return describeToken(cfg.BearerToken, now)
	case len(cfg.CertData) > 0:
		if b, _ := pem.Decode(cfg.CertData); b != nil {
			if cert, err := x509.ParseCertificate(b.Bytes); err == nil {
				return "client certificate for " + cert.Subject.String()
			}
		}
		return "client certificate"
	case cfg.ExecProvider != nil:
		return "exec plugin " + cfg.ExecProvider.Command
	}
	return "no credentials"
}

// describeToken reads a token's claims without verifying the signature.
func describeToken(token string, now time.Time) string {
	// Not "bearer <word>": redaction would take the word for the token.
	const redacted = "token [redacted]"
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.EdDSA})
	if err != nil {
		return redacted + ", not a JWT"
	}
	var cl jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&cl); err != nil {
		return redacted + ", unreadable claims"
	}
	s := redacted
	if cl.Subject != "" {
		s += " for " + cl.Subject
	}
	if cl.Expiry != nil {
		exp := cl.Expiry.Time()
		if exp.Before(now) {
			s += fmt.Sprintf(", expired at %s (%s ago)", exp.Format(time.RFC3339), now.Sub(exp).Round(time.Second))
		} else {
			s += fmt.Sprintf(", expires at %s", exp.Format(time.RFC3339))
		}
	}
	return s
}
