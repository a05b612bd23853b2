package capz

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/install"
)

// KueueInstall says how Kueue gets onto the clusters Provision creates.
type KueueInstall struct {
	// Skip installs nothing: Kueue runs there already (the ClusterClass
	// installs it as an addon, for instance). The clusters are still
	// checked for Kueue's CRDs.
	Skip bool
	// Kueue are the options for install.Kueue; Spec and Needs are set from
	// the topology (the values given there are replaced), Progress defaults
	// to the topology's.
	Kueue install.KueueOptions
	// JobSet are the options for install.JobSet, used when the topology's
	// integrations include JobSet (installed before Kueue).
	JobSet install.JobSetOptions
	// Installer installs one cluster; default HelmInstall. Tests replace it
	// (this package's tests render the plan offline, since installing needs
	// nodes).
	Installer Installer
}

// InstallPlan is what is installed on one cluster.
type InstallPlan struct {
	Kueue install.KueueOptions
	// JobSet is nil when the integrations do not include JobSet.
	JobSet *install.JobSetOptions
}

// Installer installs a plan on one cluster (Name, Role and Config set).
type Installer func(ctx context.Context, c *topology.Cluster, plan InstallPlan) error

// Plan is the installation of one cluster of a topology with spec whose
// connector needs needs: the manager gets them (the ClusterProfile CRD,
// gate and credentials providers when the connector asks for them),
// workers do not (KueueNeeds.For), nor Kueue.CredentialsPlugin; each cluster runs
// spec.KueueConfiguration of its needs.
func (k KueueInstall) Plan(spec topology.Spec, needs topology.KueueNeeds, role topology.Role, progress io.Writer) InstallPlan {
	ko := k.Kueue
	ko.Spec, ko.Needs = spec, needs.For(role)
	if role != topology.RoleManager {
		ko.CredentialsPlugin = nil // only the manager's Kueue runs the credentials providers
	}
	if ko.Progress == nil {
		ko.Progress = progress
	}
	plan := InstallPlan{Kueue: ko}
	if slices.Contains(spec.Kueue.Integrations, topology.IntegrationJobSet) {
		jo := k.JobSet
		if jo.Progress == nil {
			jo.Progress = progress
		}
		plan.JobSet = &jo
	}
	return plan
}

// HelmInstall is the default Installer: install.JobSet when planned, then
// install.Kueue (which waits for the Deployment, the webhook endpoints and
// the leader Lease), then it waits until Kueue's webhooks accept a dry-run
// ResourceFlavor, so that the MultiKueue setup that follows does not meet a
// webhook whose CA bundle is not injected yet.
func HelmInstall(ctx context.Context, c *topology.Cluster, plan InstallPlan) error {
	if plan.JobSet != nil {
		if _, err := install.JobSet(ctx, c, *plan.JobSet); err != nil {
			return err
		}
	}
	if _, err := install.Kueue(ctx, c, plan.Kueue); err != nil {
		return err
	}
	return waitWebhooks(ctx, c, cmp.Or(plan.Kueue.Timeout, install.DefaultTimeout))
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
	return install.RetryWebhook(ctx, timeout, fmt.Sprintf("Kueue's webhooks on cluster %q", c.Name), probe)
}

// install runs the Installer on every cluster in parallel.
func (p *Provider) install(ctx context.Context, spec topology.Spec, clusters []existing.Cluster) error {
	k := p.o.Kueue
	if k.Skip {
		fmt.Fprintf(p.progress, "capz: Kueue.Skip: Kueue must run on the clusters already\n")
		return nil
	}
	var needs topology.KueueNeeds
	if spec.Connector != nil {
		var err error
		if needs, err = spec.Connector.KueueNeeds(ctx); err != nil {
			return fmt.Errorf("capz: connector %s: %w", spec.Connector.Name(), err)
		}
	}
	inst := k.Installer
	if inst == nil {
		inst = HelmInstall
	}
	start := time.Now()
	err := parallel(len(clusters), func(i int) error {
		role := topology.RoleWorker
		if i == 0 {
			role = topology.RoleManager
		}
		c := &topology.Cluster{Name: clusters[i].Name, Role: role, Config: clusters[i].Config}
		if err := inst(ctx, c, k.Plan(spec, needs, role, p.progress)); err != nil {
			return fmt.Errorf("capz: cluster %q: installing Kueue: %w", c.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(p.progress, "capz: Kueue installed on %d clusters in %s\n", len(clusters), time.Since(start).Round(time.Second))
	return nil
}
