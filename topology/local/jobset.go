package local

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetcontrollers "sigs.k8s.io/jobset/pkg/controllers"

	"github.com/multikueue-testkit/testkit/internal/modsrc"
	"github.com/multikueue-testkit/testkit/topology"
)

// The JobSet controller (sigs.k8s.io/jobset v0.11.1) runs in this process on
// every worker of a topology with the JobSet integration, wired as JobSet's
// main.go wires it: the JobSet and pod reconcilers with their indexes. On the
// manager only its defaulting webhook runs: the manager's JobSets are
// MultiKueue's (spec.managedBy), which JobSet's controller leaves alone.
//
// JobSet's pkg/webhooks does not compile against controller-runtime v0.23,
// and the controller needs its defaults (a nil spec.network or
// spec.successPolicy makes it panic), so the defaulter is ported below. The
// validating webhook and the pod webhooks (exclusive placement) are not.
// JobSet's metrics are not registered (metrics.Register uses MustRegister on
// the process-global registry: the second cluster would panic).

// jobSetWebhookPrefix prefixes JobSet's webhook configuration names, next to
// Kueue's "kueue-" ones; its webhook paths equal Kueue's JobSet webhook
// paths, so it has a server and port of its own.
const jobSetWebhookPrefix = "jobset-"

// jobSetDefaultingPath is the path of JobSet's defaulting webhook
// (config/components/webhook/manifests.yaml, mjobset.kb.io).
const jobSetDefaultingPath = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"

// loadJobSetWebhookConfigs reads JobSet's webhook registrations from its
// pinned module.
func loadJobSetWebhookConfigs(ctx context.Context) (webhookConfigs, error) {
	return loadModuleWebhookConfigs(ctx, modsrc.JobSet, jobSetWebhookPrefix)
}

// startJobSet runs JobSet's defaulting webhook on cluster c and, on a
// worker, its controllers, in a manager with the jobset-controller identity,
// and registers the webhook.
func (lc *localCluster) startJobSet(ctx context.Context, c *topology.Cluster, worker bool, hooks webhookConfigs, certDir string, timeout time.Duration) error {
	scheme, err := topology.NewScheme()
	if err != nil {
		return err
	}
	port, err := lc.cp.ports.free()
	if err != nil {
		return err
	}
	server := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir})
	mgr, err := newComponentManager(componentOptions{
		cfg: lc.cp.configAs(lc.cp.jobset), logPath: filepath.Join(lc.cp.dir, "jobset.log"), scheme: scheme, webhook: server,
	})
	if err != nil {
		return fmt.Errorf("cluster %q: JobSet controller: %w", lc.name, err)
	}
	// GetWebhookServer adds the server to the manager's runnables.
	mgr.GetWebhookServer().Register(jobSetDefaultingPath, admission.WithDefaulter[*jobset.JobSet](scheme, jobSetDefaulter{}))
	if worker {
		if err := jobsetcontrollers.SetupJobSetIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
			return fmt.Errorf("cluster %q: JobSet indexes: %w", lc.name, err)
		}
		if err := jobsetcontrollers.SetupPodIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
			return fmt.Errorf("cluster %q: JobSet pod indexes: %w", lc.name, err)
		}
		js := jobsetcontrollers.NewJobSetReconciler(mgr.GetClient(), mgr.GetScheme(), mgr.GetEventRecorderFor("jobset"))
		if err := js.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("cluster %q: JobSet controller: %w", lc.name, err)
		}
		pods := jobsetcontrollers.NewPodReconciler(mgr.GetClient(), mgr.GetScheme(), mgr.GetEventRecorderFor("pod"))
		if err := pods.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("cluster %q: JobSet pod controller: %w", lc.name, err)
		}
	}
	if err := lc.startComponent(ctx, "JobSet controller", mgr, server, timeout); err != nil {
		return err
	}
	return registerWebhooks(ctx, c, hooks, servedBy(server), port, lc.cp.ca.certPEM)
}

// jobSetDefaulter is JobSet v0.11.1's defaulting webhook, ported from
// sigs.k8s.io/jobset@v0.11.1/pkg/webhooks/jobset_webhook.go
// (jobSetWebhook.Default), which does not compile against
// controller-runtime v0.23 (it implements the pre-generics Defaulter).
type jobSetDefaulter struct{}

var _ admission.Defaulter[*jobset.JobSet] = jobSetDefaulter{}

// Default sets what JobSet v0.11.1 defaults on create.
func (jobSetDefaulter) Default(_ context.Context, js *jobset.JobSet) error {
	// Default success policy to operator "All" targeting all replicatedJobs.
	if js.Spec.SuccessPolicy == nil {
		js.Spec.SuccessPolicy = &jobset.SuccessPolicy{Operator: jobset.OperatorAll}
	}
	if js.Spec.StartupPolicy == nil {
		js.Spec.StartupPolicy = &jobset.StartupPolicy{StartupPolicyOrder: jobset.AnyOrder}
	}
	for i := range js.Spec.ReplicatedJobs {
		// Default job completion mode to indexed.
		if js.Spec.ReplicatedJobs[i].Template.Spec.CompletionMode == nil {
			js.Spec.ReplicatedJobs[i].Template.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		}
		// Default pod restart policy to OnFailure.
		if js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.RestartPolicy == "" {
			js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		}
	}
	// Enable DNS hostnames by default.
	if js.Spec.Network == nil {
		js.Spec.Network = &jobset.Network{}
	}
	if js.Spec.Network.EnableDNSHostnames == nil {
		js.Spec.Network.EnableDNSHostnames = ptr.To(true)
	}
	if js.Spec.Network.PublishNotReadyAddresses == nil {
		js.Spec.Network.PublishNotReadyAddresses = ptr.To(true)
	}
	// Apply the default failure policy rule name policy.
	if js.Spec.FailurePolicy != nil {
		for i := range js.Spec.FailurePolicy.Rules {
			rule := &js.Spec.FailurePolicy.Rules[i]
			if len(rule.Name) == 0 {
				rule.Name = fmt.Sprintf("failurePolicyRule%v", i)
			}
		}
	}
	// Apply the default retention policy for the VolumeClaimPolicies.
	for i, policy := range js.Spec.VolumeClaimPolicies {
		if policy.RetentionPolicy == nil {
			js.Spec.VolumeClaimPolicies[i].RetentionPolicy = &jobset.VolumeRetentionPolicy{
				WhenDeleted: ptr.To(jobset.RetentionPolicyDelete),
			}
		}
	}
	return nil
}
