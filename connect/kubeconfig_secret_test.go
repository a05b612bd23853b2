package connect_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// TestKubeconfigSecretGrantsExactlyWorkerRules connects a worker with
// KubeconfigSecret on a local topology, then uses the kubeconfig it wrote to
// the manager's Secret as Kueue would: the token authenticates on the worker
// as the connector's ServiceAccount (SelfSubjectReview), and the worker allows
// it, cluster-wide, exactly the verbs of WorkerRules on each of their
// resources and no other verb on them, nor anything on a few look-alikes
// (SelfSubjectAccessReview).
func TestKubeconfigSecretGrantsExactlyWorkerRules(t *testing.T) {
	ctx := context.Background()
	integrations := []string{topology.IntegrationBatchJob, topology.IntegrationJobSet}
	topo, err := local.New(ctx, topology.Options{Workers: 1, Connector: connect.KubeconfigSecret{},
		Kueue: topology.KueueOptions{Integrations: integrations}}, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	worker := topo.Workers[0]
	kueueNS := topo.Spec.Kueue.Namespace

	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: kueueNS, Name: "multikueue-" + worker.Name}
	if err := topo.Manager.Client.Get(ctx, key, sec); err != nil {
		t.Fatalf("cluster %q: Secret %s: %v", topo.Manager.Name, key, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(sec.Data[connect.SecretKey])
	if err != nil {
		t.Fatalf("Secret %s: kubeconfig: %v", key, err)
	}
	if cfg.Host != worker.ServerForManager() {
		t.Errorf("kubeconfig server %q, want the worker's %q", cfg.Host, worker.ServerForManager())
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("cluster %q: the Secret's token does not authenticate: %v", worker.Name, err)
	}
	wantUser := fmt.Sprintf("system:serviceaccount:%s:multikueue-%s", kueueNS, topo.Manager.Name)
	if got := who.Status.UserInfo.Username; got != wantUser {
		t.Errorf("cluster %q: token authenticates as %q, want %q", worker.Name, got, wantUser)
	}

	allVerbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	allowed := func(verb, group, resource string) bool {
		t.Helper()
		res, sub, _ := strings.Cut(resource, "/")
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: group, Resource: res, Subresource: sub,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("cluster %q: SelfSubjectAccessReview %s %s/%s: %v", worker.Name, verb, group, resource, err)
		}
		return r.Status.Allowed
	}
	checked := 0
	for _, rule := range connect.WorkerRules(integrations) {
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, verb := range allVerbs {
					want := slices.Contains(rule.Verbs, verb)
					if got := allowed(verb, group, res); got != want {
						t.Errorf("cluster %q: %s on %s in group %q: allowed %v, WorkerRules say %v", worker.Name, verb, res, group, got, want)
					}
					checked++
				}
			}
		}
	}
	for _, o := range []struct{ verb, group, resource string }{
		{"get", "", "secrets"},
		{"list", "", "pods"},
		{"create", "", "namespaces"},
		{"get", "kueue.x-k8s.io", "clusterqueues"},
		{"create", "ray.io", "rayjobs"}, // an integration not in use
		{"update", "rbac.authorization.k8s.io", "clusterroles"},
	} {
		if allowed(o.verb, o.group, o.resource) {
			t.Errorf("cluster %q: %s on %s in group %q allowed; WorkerRules do not grant it", worker.Name, o.verb, o.resource, o.group)
		}
		checked++
	}
	t.Logf("%d access reviews as %s", checked, wantUser)
}
