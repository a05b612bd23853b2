package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/multikueue-testkit/testkit/topology"
)

// webhookConfigs are a project's webhook registrations from a pinned
// source tree's config/components/webhook/manifests.yaml (Kueue's, JobSet's).
type webhookConfigs struct {
	// prefix is put before each configuration's name when registering it,
	// so that projects whose manifests use the same names do not collide.
	prefix     string
	mutating   []*admissionv1.MutatingWebhookConfiguration
	validating []*admissionv1.ValidatingWebhookConfiguration
}

// loadWebhookConfigsAt reads the webhook registrations of the source tree
// at root (a module's or a checkout's).
func loadWebhookConfigsAt(root, prefix string) (webhookConfigs, error) {
	return loadWebhookConfigsFile(filepath.Join(root, "config", "components", "webhook", "manifests.yaml"), prefix)
}

// loadWebhookConfigsFile reads the webhook registrations of one manifest
// file.
func loadWebhookConfigsFile(path, prefix string) (webhookConfigs, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return webhookConfigs{}, err
	}
	out := webhookConfigs{prefix: prefix}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var doc struct {
			Kind string `json:"kind"`
		}
		var rawDoc yamlRaw
		if err := dec.Decode(&rawDoc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, fmt.Errorf("decode %s: %w", path, err)
		}
		if err := yaml.Unmarshal(rawDoc, &doc); err != nil {
			return out, err
		}
		switch doc.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal(rawDoc, m); err != nil {
				return out, err
			}
			out.mutating = append(out.mutating, m)
		case "ValidatingWebhookConfiguration":
			v := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal(rawDoc, v); err != nil {
				return out, err
			}
			out.validating = append(out.validating, v)
		}
	}
}

// yamlRaw captures one YAML document as JSON bytes.
type yamlRaw []byte

func (r *yamlRaw) UnmarshalJSON(b []byte) error { *r = append((*r)[:0], b...); return nil }

// paths are the webhook paths the registrations name.
func (w webhookConfigs) paths() []string {
	var out []string
	for _, m := range w.mutating {
		for _, h := range m.Webhooks {
			if h.ClientConfig.Service != nil && h.ClientConfig.Service.Path != nil {
				out = append(out, *h.ClientConfig.Service.Path)
			}
		}
	}
	for _, v := range w.validating {
		for _, h := range v.Webhooks {
			if h.ClientConfig.Service != nil && h.ClientConfig.Service.Path != nil {
				out = append(out, *h.ClientConfig.Service.Path)
			}
		}
	}
	return out
}

// registerWebhooks points the webhook registrations at the in-process
// server on 127.0.0.1:port, keeping only the webhooks that server serves (a
// registration for a disabled Kueue integration would reject those objects).
func registerWebhooks(ctx context.Context, c *topology.Cluster, cfgs webhookConfigs, served func(path string) bool, port int, caPEM []byte) error {
	clientConfig := func(svc *admissionv1.ServiceReference) (admissionv1.WebhookClientConfig, bool) {
		if svc == nil || svc.Path == nil || !served(*svc.Path) {
			return admissionv1.WebhookClientConfig{}, false
		}
		u := fmt.Sprintf("https://127.0.0.1:%d%s", port, *svc.Path)
		return admissionv1.WebhookClientConfig{URL: &u, CABundle: caPEM}, true
	}
	for _, m := range cfgs.mutating {
		obj := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: cfgs.prefix + m.Name}}
		hooks := pointAt(m.Webhooks, func(w *admissionv1.MutatingWebhook) *admissionv1.WebhookClientConfig { return &w.ClientConfig }, clientConfig)
		if len(hooks) == 0 {
			continue // none served here
		}
		if _, err := controllerutil.CreateOrUpdate(ctx, c.Client, obj, func() error { obj.Webhooks = hooks; return nil }); err != nil {
			return fmt.Errorf("cluster %q: register MutatingWebhookConfiguration %s: %w", c.Name, obj.Name, err)
		}
	}
	for _, v := range cfgs.validating {
		obj := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: cfgs.prefix + v.Name}}
		hooks := pointAt(v.Webhooks, func(w *admissionv1.ValidatingWebhook) *admissionv1.WebhookClientConfig { return &w.ClientConfig }, clientConfig)
		if len(hooks) == 0 {
			continue // none served here
		}
		if _, err := controllerutil.CreateOrUpdate(ctx, c.Client, obj, func() error { obj.Webhooks = hooks; return nil }); err != nil {
			return fmt.Errorf("cluster %q: register ValidatingWebhookConfiguration %s: %w", c.Name, obj.Name, err)
		}
	}
	return nil
}

// pointAt returns the webhooks that this Kueue serves, each with its client
// config rewritten by rewrite; cc gives access to a webhook's client config.
func pointAt[W any](in []W, cc func(*W) *admissionv1.WebhookClientConfig, rewrite func(*admissionv1.ServiceReference) (admissionv1.WebhookClientConfig, bool)) []W {
	var out []W
	for _, w := range in {
		if next, ok := rewrite(cc(&w).Service); ok {
			*cc(&w) = next
			out = append(out, w)
		}
	}
	return out
}
