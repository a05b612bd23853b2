package local

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
)

// haService is one of Kueue's Services (config/components/webhook or
// visibility in the pinned module), named and placed as Kueue's kustomize
// overlay does: "kueue-" prefix, Kueue's namespace.
type haService struct {
	name, namespace string
	port            corev1.ServicePort
}

func (s haService) dnsName() string { return s.name + "." + s.namespace + ".svc" }

// haServices are the webhook Service, the visibility Service and the
// visibility APIServices, read from Kueue's manifests.
type haServices struct {
	webhook, visibility                     haService
	webhookTargetPort, visibilityTargetPort int
	apiServices                             []*unstructured.Unstructured
}

// loadHAServices reads Kueue's Service and APIService manifests from its
// source tree root.
func loadHAServices(root, namespace string) (haServices, error) {
	comp := filepath.Join(root, "config", "components")
	var out haServices
	for _, s := range []struct {
		file   string
		svc    *haService
		target *int
	}{
		{filepath.Join(comp, "webhook", "service.yaml"), &out.webhook, &out.webhookTargetPort},
		{filepath.Join(comp, "visibility", "service.yaml"), &out.visibility, &out.visibilityTargetPort},
	} {
		svc := &corev1.Service{}
		if err := readManifest(s.file, svc); err != nil {
			return out, err
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.IntValue() == 0 {
			return out, fmt.Errorf("%s: want one port with a numeric targetPort, got %+v", s.file, svc.Spec.Ports)
		}
		*s.svc = haService{name: kustomizePrefix + svc.Name, namespace: namespace, port: svc.Spec.Ports[0]}
		*s.target = svc.Spec.Ports[0].TargetPort.IntValue()
	}
	for _, v := range []string{"v1beta2", "v1beta1"} {
		u := &unstructured.Unstructured{}
		file := filepath.Join(comp, "visibility", "apiservice_"+v+".yaml")
		if err := readManifest(file, &u.Object); err != nil {
			return out, err
		}
		out.apiServices = append(out.apiServices, u)
	}
	return out, nil
}

// kustomizePrefix is config/default's namePrefix.
const kustomizePrefix = "kueue-"

func readManifest(path string, into any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// podAddress is the placeholder pod address of replica i with a container
// port: 192.0.2.<i+1> (TEST-NET-1, RFC 5737: reserved for documentation and
// never routed). The API server resolves a Service to it and asks the egress
// proxy for it, which connects to the replica on 127.0.0.1; nothing ever
// dials it.
func podAddress(i, port int) string {
	return net.JoinHostPort(podIP(i), strconv.Itoa(port))
}

func podIP(i int) string { return fmt.Sprintf("192.0.2.%d", i+1) }

// register creates the two Services and their EndpointSlices, points Kueue's
// webhook registrations at the webhook Service (registered by URL first,
// as the single-replica topology does, then rewritten) and registers the
// visibility APIServices.
func (h *haCluster) register(ctx context.Context, c *topology.Cluster, hooks webhookConfigs) error {
	for _, s := range []haService{h.services.webhook, h.services.visibility} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace}}
		if _, err := controllerutil.CreateOrUpdate(ctx, c.Client, svc, func() error {
			svc.Spec.Ports = []corev1.ServicePort{s.port} // no selector: the endpoints are ours
			return nil
		}); err != nil {
			return fmt.Errorf("cluster %q: create Service %s/%s: %w", h.cluster, s.namespace, s.name, err)
		}
	}
	if err := h.writeEndpoints(ctx, h.currentReadiness()); err != nil {
		return err
	}
	served, err := h.first().servedPaths(ctx, hooks.paths())
	if err != nil {
		return err
	}
	if err := registerWebhooks(ctx, c, hooks, served, h.first().webhookPort, h.caPEM); err != nil {
		return err
	}
	if err := h.pointWebhooksAtService(ctx, c, hooks); err != nil {
		return err
	}
	for _, want := range h.services.apiServices {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(want.GroupVersionKind())
		obj.SetName(want.GetName())
		spec, _, _ := unstructured.NestedMap(want.Object, "spec")
		spec["service"] = map[string]any{"name": h.services.visibility.name, "namespace": h.namespace, "port": int64(h.services.visibility.port.Port)}
		// Kueue's manifests skip TLS verification; ours is verifiable.
		delete(spec, "insecureSkipTLSVerify")
		spec["caBundle"] = base64.StdEncoding.EncodeToString(h.caPEM)
		if _, err := controllerutil.CreateOrUpdate(ctx, c.Client, obj, func() error {
			return unstructured.SetNestedMap(obj.Object, spec, "spec")
		}); err != nil {
			return fmt.Errorf("cluster %q: register APIService %s: %w", h.cluster, obj.GetName(), err)
		}
	}
	return nil
}

// pointWebhooksAtService rewrites Kueue's registrations (those registerWebhooks
// made by URL to kueue-0) to call the webhook Service with the path each
// manifest names, as Kueue's own manifests do.
func (h *haCluster) pointWebhooksAtService(ctx context.Context, c *topology.Cluster, hooks webhookConfigs) error {
	ref := func(cc *admissionv1.WebhookClientConfig) {
		if cc.URL == nil {
			return
		}
		u := *cc.URL
		prefix := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(h.first().webhookPort))
		if len(u) < len(prefix) || u[:len(prefix)] != prefix {
			return
		}
		cc.URL = nil
		cc.Service = &admissionv1.ServiceReference{Namespace: h.namespace, Name: h.services.webhook.name,
			Path: ptr.To(u[len(prefix):]), Port: ptr.To(h.services.webhook.port.Port)}
		cc.CABundle = h.caPEM
	}
	for _, m := range hooks.mutating {
		obj := &admissionv1.MutatingWebhookConfiguration{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: hooks.prefix + m.Name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue // none served here
			}
			return fmt.Errorf("cluster %q: MutatingWebhookConfiguration %s: %w", h.cluster, hooks.prefix+m.Name, err)
		}
		for i := range obj.Webhooks {
			ref(&obj.Webhooks[i].ClientConfig)
		}
		if err := c.Client.Update(ctx, obj); err != nil {
			return fmt.Errorf("cluster %q: point MutatingWebhookConfiguration %s at Service %s: %w", h.cluster, obj.Name, h.services.webhook.name, err)
		}
	}
	for _, v := range hooks.validating {
		obj := &admissionv1.ValidatingWebhookConfiguration{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: hooks.prefix + v.Name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("cluster %q: ValidatingWebhookConfiguration %s: %w", h.cluster, hooks.prefix+v.Name, err)
		}
		for i := range obj.Webhooks {
			ref(&obj.Webhooks[i].ClientConfig)
		}
		if err := c.Client.Update(ctx, obj); err != nil {
			return fmt.Errorf("cluster %q: point ValidatingWebhookConfiguration %s at Service %s: %w", h.cluster, obj.Name, h.services.webhook.name, err)
		}
	}
	return nil
}

// endpointSliceManager marks the EndpointSlices written here.
const endpointSliceManager = "multikueue-testkit.local"

func (h *haCluster) currentReadiness() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.ready)
}

// writeEndpoints writes both Services' EndpointSlices for the given
// readiness when it differs from what was last written: one endpoint per
// replica at its placeholder pod address, Ready and Serving as probed,
// Terminating once stopped gracefully.
func (h *haCluster) writeEndpoints(ctx context.Context, ready map[string]bool) error {
	h.mu.Lock()
	same := h.written && len(ready) == len(h.ready)
	for k, v := range ready {
		same = same && h.ready[k] == v
	}
	terminating := maps.Clone(h.terminating)
	h.mu.Unlock()
	if same {
		return nil
	}
	for _, s := range []struct {
		svc    haService
		target int
	}{{h.services.webhook, h.services.webhookTargetPort}, {h.services.visibility, h.services.visibilityTargetPort}} {
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: s.svc.name + "-replicas", Namespace: s.svc.namespace}}
		if _, err := controllerutil.CreateOrUpdate(ctx, h.client, es, func() error {
			es.Labels = map[string]string{discoveryv1.LabelServiceName: s.svc.name, discoveryv1.LabelManagedBy: endpointSliceManager}
			es.AddressType = discoveryv1.AddressTypeIPv4
			es.Ports = []discoveryv1.EndpointPort{{Name: ptr.To(s.svc.port.Name), Port: ptr.To(int32(s.target)), Protocol: ptr.To(corev1.ProtocolTCP)}}
			es.Endpoints = es.Endpoints[:0]
			for i, r := range h.replicas {
				name := r.name
				es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
					Addresses: []string{podIP(i)},
					Hostname:  ptr.To(name),
					Conditions: discoveryv1.EndpointConditions{
						Ready: ptr.To(ready[name]), Serving: ptr.To(ready[name]), Terminating: ptr.To(terminating[name]),
					},
				})
			}
			return nil
		}); err != nil {
			return fmt.Errorf("cluster %q: write EndpointSlice %s/%s: %w", h.cluster, es.Namespace, es.Name, err)
		}
	}
	h.mu.Lock()
	h.ready, h.written = ready, true
	h.mu.Unlock()
	return nil
}

// waitAPIServicesAvailable waits until the aggregator reports every
// visibility APIService Available.
func (h *haCluster) waitAPIServicesAvailable(ctx context.Context) error {
	names := make([]string, 0, len(h.services.apiServices))
	for _, a := range h.services.apiServices {
		names = append(names, a.GetName())
	}
	slices.Sort(names)
	return poll.Until(ctx, h.timeout(), fmt.Sprintf("cluster %q: APIServices %v to be Available", h.cluster, names), func(ctx context.Context) error {
		for _, a := range h.services.apiServices {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(a.GroupVersionKind())
			if err := h.client.Get(ctx, client.ObjectKey{Name: a.GetName()}, obj); err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			ok := false
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Available" && m["status"] == "True" {
					ok = true
				}
			}
			if !ok {
				return fmt.Errorf("APIService %s: conditions %v", a.GetName(), conds)
			}
		}
		return nil
	})
}
