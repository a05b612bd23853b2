// Package install installs Kueue (and the JobSet controller) on real clusters
// with the Helm Go SDK, from the charts inside the pinned Go modules
// (charts/kueue of sigs.k8s.io/kueue, charts/jobset of sigs.k8s.io/jobset)
// located in the module cache at run time, never copied into this
// repository.
//
//	rel, err := install.Kueue(ctx, cluster, install.KueueOptions{Spec: spec, Needs: needs, Progress: os.Stderr})
//	...
//	defer rel.Uninstall(ctx)
//
// Kueue runs the configuration the local topology runs in-process
// (topology.Spec.KueueConfiguration), adjusted only where a Deployment needs
// it: internal certificate management on, the chart's health, metrics,
// webhook and leader-election settings kept, feature gates on the command
// line. The image is the released one (registry.k8s.io/kueue/kueue at the
// pinned version, IfNotPresent), not the chart's staging default.
// RenderKueue and RenderJobSet render the same installation offline.
//
// Install is idempotent: a release that exists is upgraded. Kueue waits for
// the Deployment to be Available, the webhook Service to have a ready
// endpoint and the leader Lease to have a holder; the first writes after it
// should still go through RetryWebhook, since the CA bundle is injected into
// the webhook configurations a moment later.
//
// Uninstall deletes Kueue's CRDs (the chart keeps them in templates/, so
// they belong to the release) and with them every Kueue object on the
// cluster. JobSet's CRD is in its chart's crds/ directory: Helm installs it
// once and never upgrades or deletes it. The training-operator, the MPI
// operator, the AppWrapper controller and KubeRay ship no chart in their
// modules, but a kustomization: kustomize renders it into a chart in memory
// (CRDs in crds/), which Helm installs like the others.
//
// Helm reaches the cluster through the cluster's rest.Config in memory; no
// kubeconfig is written. This package does not import topology/local, so it
// builds with newer Kubernetes libraries than the local topology does.
package install
