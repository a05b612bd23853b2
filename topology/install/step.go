package install

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/topology"
)

// Step is the install step of a provider that attaches clusters
// (existing.Options.Install, capz.KueueInstall, capz.AttachOptions.Install):
// Kueue, and JobSet when the topology's integrations enable it, put on
// every cluster before MultiKueue is wired or adopted, each cluster running
// spec.KueueConfiguration of its needs. One way to say "these clusters,
// Kueue on them, MultiKueue wired", whatever made the clusters.
type Step struct {
	// Kueue are the options for Kueue(); Spec and Needs are set from the
	// topology (the values given here are replaced), CredentialsPlugin
	// goes to the manager only, Progress defaults to the topology's.
	Kueue KueueOptions
	// JobSet are the options for JobSet(), used when the topology's
	// integrations include JobSet (installed before Kueue).
	JobSet JobSetOptions
	// Installer installs one cluster; default Helm. Tests replace it
	// (installing needs nodes).
	Installer Installer
}

// Plan is what Step installs on one cluster.
type Plan struct {
	Kueue KueueOptions
	// JobSet is nil when the integrations do not include JobSet.
	JobSet *JobSetOptions
}

// Installer installs a plan on one cluster (Name, Role and Config set).
type Installer func(ctx context.Context, c *topology.Cluster, plan Plan) error

// Plan is the installation of one cluster of a topology with spec whose
// connector needs needs: the manager gets them (the ClusterProfile CRD,
// gate and credentials providers when the connector asks for them) and
// Kueue.CredentialsPlugin, workers neither (KueueNeeds.For); each cluster
// runs spec.KueueConfiguration of its needs.
func (s Step) Plan(spec topology.Spec, needs topology.KueueNeeds, role topology.Role, progress io.Writer) Plan {
	ko := s.Kueue
	ko.Spec, ko.Needs = spec, needs.For(role)
	if role != topology.RoleManager {
		ko.CredentialsPlugin = nil // only the manager's Kueue runs the credentials providers
	}
	if ko.Progress == nil {
		ko.Progress = progress
	}
	plan := Plan{Kueue: ko}
	if slices.Contains(spec.Kueue.Integrations, topology.IntegrationJobSet) {
		jo := s.JobSet
		if jo.Progress == nil {
			jo.Progress = progress
		}
		plan.JobSet = &jo
	}
	return plan
}

// Run installs on every cluster at once, clusters[0] the manager (each
// needs Name and Config; Role is set here): the connector's needs come from
// spec.Connector. An error names the cluster.
func (s Step) Run(ctx context.Context, spec topology.Spec, clusters []*topology.Cluster, progress io.Writer) error {
	progress = progressTo(progress)
	var needs topology.KueueNeeds
	if spec.Connector != nil {
		var err error
		if needs, err = spec.Connector.KueueNeeds(ctx); err != nil {
			return fmt.Errorf("install: connector %s: %w", spec.Connector.Name(), err)
		}
	}
	inst := s.Installer
	if inst == nil {
		inst = Helm
	}
	start := time.Now()
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Go(func() {
			cp := *c
			cp.Role = topology.RoleWorker
			if i == 0 {
				cp.Role = topology.RoleManager
			}
			if err := inst(ctx, &cp, s.Plan(spec, needs, cp.Role, progress)); err != nil {
				errs[i] = fmt.Errorf("install: cluster %q: installing Kueue: %w", c.Name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(progress, "install: Kueue installed on %d clusters in %s\n", len(clusters), time.Since(start).Round(time.Second))
	return nil
}

// Helm is the default Installer: JobSet() when planned, then Kueue() (which
// waits for the Deployment, the webhook endpoints and the leader Lease),
// then it waits until Kueue's webhooks accept a dry-run ResourceFlavor, so
// that the MultiKueue setup that follows does not meet a webhook whose CA
// bundle is not injected yet.
func Helm(ctx context.Context, c *topology.Cluster, plan Plan) error {
	if plan.JobSet != nil {
		if _, err := JobSet(ctx, c, *plan.JobSet); err != nil {
			return err
		}
	}
	if _, err := Kueue(ctx, c, plan.Kueue); err != nil {
		return err
	}
	return waitWebhooks(ctx, c, cmp.Or(plan.Kueue.Timeout, DefaultTimeout))
}

// waitWebhooks creates a ResourceFlavor with dry run until Kueue's webhook
// answers.
func waitWebhooks(ctx context.Context, c *topology.Cluster, timeout time.Duration) error {
	scheme, err := topology.NewScheme()
	if err != nil {
		return err
	}
	cl, err := client.New(rest.CopyConfig(c.Config), client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("cluster %q: %w", c.Name, err)
	}
	probe := func(ctx context.Context) error {
		rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "multikueue-testkit-webhook-probe"}}
		if err := cl.Create(ctx, rf, client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	return RetryWebhook(ctx, timeout, fmt.Sprintf("Kueue's webhooks on cluster %q", c.Name), probe)
}
