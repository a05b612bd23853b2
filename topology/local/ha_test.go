package local_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestHAEveryReplicaServes starts a manager whose Kueue runs as two replicas
// and reaches each replica directly: both answer Kueue's validating webhook
// (a ClusterQueue with a bad spec is denied, a good one allowed) and the
// visibility API; through the API server, the webhooks and the visibility
// APIService work, and concurrent calls reach both replicas; kueue-0 leads.
func TestHAEveryReplicaServes(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	topo, err := local.New(ctx, topology.Options{Workers: 1}, local.Options{HA: local.HA{Manager: true}})
	if err != nil {
		t.Fatal(err)
	}
	topo.CloseWith(t)
	t.Logf("HA topology (manager 2 replicas, 1 worker) ready in %s", time.Since(start).Round(time.Millisecond))
	p := topo.Provider().(*local.Provider)
	mgr := topo.Manager.Name
	rs, err := p.Replicas(mgr)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("replicas: %d, want 2", len(rs))
	}
	if leader, err := p.LeaderReplica(ctx, mgr); err != nil || leader != "kueue-0" {
		t.Fatalf("leader %q (%v), want kueue-0", leader, err)
	}
	if _, err := p.Replicas(topo.Workers[0].Name); err == nil {
		t.Errorf("Replicas(%q): no error for a worker without HA", topo.Workers[0].Name)
	}
	cq := topo.Spec.Queues.ClusterQueue
	for _, r := range rs {
		for _, bad := range []bool{false, true} {
			allowed, msg, err := reviewClusterQueue(ctx, r, bad)
			if err != nil {
				t.Fatalf("replica %s: webhook: %v", r.Name, err)
			}
			if allowed == bad {
				t.Errorf("replica %s: ClusterQueue (bad preemption: %v): allowed=%v (%s)", r.Name, bad, allowed, msg)
			}
		}
		vc, err := visibilityclient.NewForConfig(r.Visibility)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := vc.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq, metav1.GetOptions{}); err != nil {
			t.Errorf("replica %s: visibility directly: %v", r.Name, err)
		}
	}
	// Through the API server: the APIService and the webhook Service.
	vc, err := visibilityclient.NewForConfig(topo.Manager.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, get := range []func() error{
		func() error {
			_, err := vc.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := vc.VisibilityV1beta1().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq, metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); err != nil {
			t.Errorf("visibility through the API server: %v", err)
		}
	}
	// Kueue's mutating webhook suspends a queued Job: the dry-run response
	// shows it was called through the Service.
	job := workload.NewJob("ha-dry-run", topo.Spec.Queues.Namespaces[0]).Queue(topo.Spec.Queues.LocalQueue).Requests("1", "1Gi").Obj()
	job.Spec.Suspend = ptr.To(false)
	if err := topo.Manager.Client.Create(ctx, job, client.DryRunAll); err != nil {
		t.Fatalf("dry-run Job through the API server: %v", err)
	}
	if !ptr.Deref(job.Spec.Suspend, false) {
		t.Errorf("dry-run Job through the API server: not suspended; Kueue's mutating webhook was not called")
	}

	// Concurrent calls through the API server reach both replicas: it calls
	// Service webhooks over HTTP/1.1, one connection per concurrent call,
	// each to a ready endpoint picked at random; the aggregator does the
	// same for the visibility APIService.
	round := func() {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				j := workload.NewJob(fmt.Sprintf("ha-spread-%d", i), topo.Spec.Queues.Namespaces[0]).Queue(topo.Spec.Queues.LocalQueue).Requests("1", "1Gi").Obj()
				if err := topo.Manager.Client.Create(ctx, j, client.DryRunAll); err != nil {
					t.Errorf("dry-run Job through the API server: %v", err)
				}
				if _, err := vc.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq, metav1.GetOptions{}); err != nil {
					t.Errorf("visibility through the API server: %v", err)
				}
			})
		}
		wg.Wait()
	}
	err = poll.Until(ctx, time.Minute, "concurrent calls through the API server to reach both replicas", func(context.Context) error {
		round()
		if rs, err = p.Replicas(mgr); err != nil {
			return poll.Stop(err)
		}
		for _, r := range rs {
			if r.WebhookEgress.Connections == 0 || r.VisibilityEgress.Connections == 0 {
				return fmt.Errorf("replica %s got webhook %d, visibility %d connections", r.Name, r.WebhookEgress.Connections, r.VisibilityEgress.Connections)
			}
		}
		return nil
	})
	for _, r := range rs {
		t.Logf("replica %s: the API server connected %d times for webhooks, %d for visibility", r.Name, r.WebhookEgress.Connections, r.VisibilityEgress.Connections)
	}
	if err != nil {
		t.Error(err)
	}
}

// reviewClusterQueue sends an AdmissionReview for a ClusterQueue (with a
// preemption policy the webhook refuses when bad) straight to one replica's
// validating webhook.
func reviewClusterQueue(ctx context.Context, r local.Replica, bad bool) (bool, string, error) {
	cq := &kueue.ClusterQueue{TypeMeta: metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "ClusterQueue"},
		ObjectMeta: metav1.ObjectMeta{Name: "direct"}, Spec: kueue.ClusterQueueSpec{
			QueueingStrategy: kueue.BestEffortFIFO, StopPolicy: ptr.To(kueue.None)}}
	if bad { // refused by the webhook: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never
		cq.Spec.Preemption = &kueue.ClusterQueuePreemption{ReclaimWithinCohort: kueue.PreemptionPolicyNever,
			BorrowWithinCohort: &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority}}
	}
	raw, err := json.Marshal(cq)
	if err != nil {
		return false, "", err
	}
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "direct-1", Kind: metav1.GroupVersionKind{Group: kueue.SchemeGroupVersion.Group, Version: kueue.SchemeGroupVersion.Version, Kind: "ClusterQueue"},
			Resource: metav1.GroupVersionResource{Group: kueue.SchemeGroupVersion.Group, Version: kueue.SchemeGroupVersion.Version, Resource: "clusterqueues"},
			Name:     "direct", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}}
	body, err := json.Marshal(review)
	if err != nil {
		return false, "", err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.WebhookCA)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.WebhookURL+"/validate-kueue-x-k8s-io-v1beta2-clusterqueue", bytes.NewReader(body))
	if err != nil {
		return false, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &got); err != nil || got.Response == nil {
		return false, "", fmt.Errorf("%s: %s", resp.Status, out)
	}
	msg := ""
	if got.Response.Result != nil {
		msg = got.Response.Result.Message
	}
	return got.Response.Allowed, msg, nil
}
