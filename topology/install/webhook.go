package install

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/poll"
)

// IsWebhookUnavailable tells an API error caused by a webhook that could not
// be called (no endpoints yet, connection refused or reset, a TLS error while
// the CA bundle is being injected, a timeout) from a webhook's answer. A
// webhook that denied the request ("admission webhook ... denied the
// request") is not unavailable: retrying would not help.
func IsWebhookUnavailable(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	if strings.Contains(msg, "denied the request") {
		return false
	}
	// Admission webhooks: `failed calling webhook "x": failed to call webhook: Post ...`.
	// Conversion webhooks: `conversion webhook for kueue.x-k8s.io/v1beta1, Kind=... failed: Post ...`.
	return containsAny(msg, "failed calling webhook", "failed to call webhook") ||
		(strings.Contains(msg, "conversion webhook for") && strings.Contains(msg, "failed"))
}

// RetryWebhook calls fn until it succeeds, fails with an error that is not
// IsWebhookUnavailable (returned at once), or timeout passes (the last error
// is in the returned one). Use it for the first writes after an install,
// while the webhook servers warm up: Kueue's internal certificate manager
// injects the CA bundle into its webhook configurations a few seconds after
// its Deployment is Available. what names the write for the error.
func RetryWebhook(ctx context.Context, timeout time.Duration, what string, fn func(context.Context) error) error {
	refused := false
	err := poll.UntilEvery(ctx, timeout, 250*time.Millisecond, what+" accepted through the webhooks", func(ctx context.Context) error {
		err := fn(ctx)
		if err == nil || IsWebhookUnavailable(err) {
			return err
		}
		refused = true
		return poll.Stop(err)
	})
	if refused {
		return fmt.Errorf("%s: %w", what, err)
	}
	return err
}

// CreateThroughWebhooks creates obj with c, retrying while the webhooks are
// unavailable (see RetryWebhook). The error names the object.
func CreateThroughWebhooks(ctx context.Context, c client.Client, obj client.Object, timeout time.Duration) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = fmt.Sprintf("%T", obj)
	}
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return RetryWebhook(ctx, timeout, fmt.Sprintf("create of %s %s", kind, name), func(ctx context.Context) error {
		return c.Create(ctx, obj)
	})
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
