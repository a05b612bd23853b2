package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/kind/pkg/cluster"

	"github.com/multikueue-testkit/testkit/connect"
	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/internal/inotify"
	"github.com/multikueue-testkit/testkit/internal/redact"
	"github.com/multikueue-testkit/testkit/internal/syncwriter"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/existing"
	"github.com/multikueue-testkit/testkit/topology/install"
	"github.com/multikueue-testkit/testkit/topology/kind/nodeimage"
)

// Provider implements topology.Provider with kind clusters: one kind cluster
// per topology cluster, created (or reused), loaded with the images the
// pods need, with Kueue (and JobSet) installed by topology/install, then
// attached as topology/existing attaches clusters. Get it from a topology
// made by New with topo.Provider().(*kind.Provider).
type Provider struct {
	opts Options
	rt   Runtime

	mu        sync.Mutex
	closed    bool
	dir       string
	progress  io.Writer
	kindNames map[string]string        // topology name -> kind cluster name
	created   []string                 // kind clusters this provider created (or began to)
	took      map[string]time.Duration // how long kind took to create each (Ready control plane)
	reused    []string                 // kind clusters that existed before
	images    []ImageLoad
	// network is kind's container network when claimNetwork claimed it:
	// Close removes it once no container uses it.
	network       string
	networkMarker string // nodeimage.NetworkMarker of network
}

// PluginCommand is where the ClusterProfile connector's credentials plugin
// lives in the manager's Kueue pod on kind (connect.ClusterProfile's
// PluginCommand): the provider puts it there from an image it builds.
const PluginCommand = "/plugins/secretreader-plugin"

// DefaultConnector is connect.Default (topology.ConnectorDefaulter), with
// the ClusterProfile connector's plugin at PluginCommand, in Kueue's pod.
func (p *Provider) DefaultConnector() (topology.Connector, error) {
	c, err := connect.Default()
	if cp, ok := c.(connect.ClusterProfile); ok && cp.PluginCommand == "" {
		cp.PluginCommand = PluginCommand
		c = cp
	}
	return c, err
}

var _ topology.ConnectorDefaulter = (*Provider)(nil)

// SuggestedTimeouts implements topology.TimeoutSuggester: pods run on real
// kubelets in containers (images loaded offline, but containers to create
// and probes to pass), so minutes where the local topology takes seconds.
func (p *Provider) SuggestedTimeouts() topology.Timeouts {
	return topology.Timeouts{Progress: 5 * time.Minute, Start: 3 * time.Minute}
}

var _ topology.TimeoutSuggester = (*Provider)(nil)

// SuggestedJobSize implements topology.JobSizeSuggester: a kind node is a
// container with the host's CPUs (2 here), of which the control plane,
// CoreDNS and Kueue request 1350m, so a 1-CPU job stays Pending
// ("Insufficient cpu") although Kueue admits it. 100m and 64Mi fit several
// at once and are enough for the job image's sleep.
func (p *Provider) SuggestedJobSize() topology.JobSize {
	return topology.JobSize{CPU: "100m", Memory: "64Mi"}
}

var _ topology.JobSizeSuggester = (*Provider)(nil)

var (
	_ topology.Provider      = (*Provider)(nil)
	_ topology.ClusterKeeper = (*Provider)(nil)
)

// Name implements topology.Provider.
func (*Provider) Name() string { return "kind" }

// Runtime is the container runtime kind drives.
func (p *Provider) Runtime() Runtime { return p.rt }

// KindName returns the kind cluster name of a topology cluster ("" before
// Provision).
func (p *Provider) KindName(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kindNames[name]
}

// Created and Reused list the kind clusters this provider created and the
// ones it found and reused (never deleted).
func (p *Provider) Created() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.created)
}

// CreationTimes is how long kind took to create each cluster this provider
// created (kind name → time until its control plane was Ready), the clusters
// made Options.Parallel at a time. Reused clusters are absent.
func (p *Provider) CreationTimes() map[string]time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.took)
}

// Reused: see Created.
func (p *Provider) Reused() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reused)
}

// Images says which images were loaded into which clusters, and which were
// not and why.
func (p *Provider) Images() []ImageLoad {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.images)
}

// Dir is the provider's temporary directory (kind's kubeconfig files, image
// archives while they load); removed on Close.
func (p *Provider) Dir() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dir
}

// KeepsClusters implements topology.ClusterKeeper: when a cluster outlives
// the topology (Keep, or a reused cluster), Close first deletes the objects
// the topology and its connector created on the clusters.
func (p *Provider) KeepsClusters() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opts.Keep || len(p.reused) > 0
}

var errClosed = errors.New("kind: provider is closed")

func (p *Provider) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// parallel is Options.Parallel, at least 1.
func (p *Provider) parallel() int { return max(1, p.opts.Parallel) }

// member is one cluster of the topology as Provision handles it.
type member struct {
	name       string // topology name
	kindName   string
	role       topology.Role
	reused     bool
	attach     existing.Cluster
	kubeconfig topology.Secret // the external admin kubeconfig
	cluster    *topology.Cluster
}

func (m *member) kubeconfigPath(dir string) string {
	return filepath.Join(dir, m.kindName+".kubeconfig")
}

// Provision implements topology.Provider.
func (p *Provider) Provision(ctx context.Context, spec topology.Spec) (*topology.Cluster, []*topology.Cluster, error) {
	if p.isClosed() {
		return nil, nil, errClosed
	}
	o := p.opts
	progress := syncwriter.New(spec.Progress) // clusters are made in parallel
	members, err := p.members(spec)
	if err != nil {
		return nil, nil, err
	}
	if err := unsupportedIntegrations(spec); err != nil {
		return nil, nil, err
	}
	if spec.Connector == nil {
		return nil, nil, errors.New("kind: Spec.Connector: nil (topology.New defaults it; a Spec handed to Provision directly must name one)")
	}
	needs, err := spec.Connector.KueueNeeds(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("connector %s: %w", spec.Connector.Name(), err)
	}
	jobSet := slices.Contains(spec.Kueue.Integrations, topology.IntegrationJobSet)
	// Offline first: the images the charts will deploy.
	kueueRef, jobSetRef, err := controllerImages(ctx, spec, needs, o, jobSet)
	if err != nil {
		return nil, nil, err
	}
	plan := planImages(kueueRef, jobSetRef, o.ExtraImages)

	dir, err := os.MkdirTemp("", "mktk-kind-")
	if err != nil {
		return nil, nil, fmt.Errorf("kind: %w", err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		os.RemoveAll(dir)
		return nil, nil, errClosed
	}
	p.dir, p.progress = dir, progress
	p.kindNames = map[string]string{}
	for _, m := range members {
		p.kindNames[m.name] = m.kindName
	}
	p.mu.Unlock()

	if err := p.prepareOffline(ctx, kueueRef, jobSetRef, progress); err != nil {
		return nil, nil, err
	}
	plugin, err := p.credentialsPlugin(ctx, needs, progress)
	if err != nil {
		return nil, nil, err
	}
	if plugin != nil {
		plan.add(plugin.Image.Repository+":"+plugin.Image.Tag, topology.RoleManager)
	}
	p.claimNetwork(ctx, kindNetwork())
	if err := p.createOrReuse(ctx, members, progress); err != nil {
		return nil, nil, err
	}
	for _, m := range members {
		kp := p.kindProvider(progress, m.kindName)
		ext, err := kp.KubeConfig(m.kindName, false)
		if err != nil {
			return nil, nil, fmt.Errorf("kind: cluster %q: external kubeconfig: %s", m.kindName, redact.String(err.Error()))
		}
		in, err := kp.KubeConfig(m.kindName, true)
		if err != nil {
			return nil, nil, fmt.Errorf("kind: cluster %q: internal kubeconfig: %s", m.kindName, redact.String(err.Error()))
		}
		if m.attach, err = FromKubeconfigs(m.name, []byte(ext), []byte(in)); err != nil {
			return nil, nil, err
		}
		m.kubeconfig = topology.Secret(ext)
		fmt.Fprintf(progress, "kind: %s cluster %q (kind %q): API server %s for the tests, %s for the manager\n", m.role, m.name, m.kindName, m.attach.Config.Host, serverForManager(m.attach))
	}
	if err := p.loadImages(ctx, members, plan, progress); err != nil {
		return nil, nil, err
	}
	if err := p.installAll(ctx, spec, plugin, members, progress); err != nil {
		return nil, nil, err
	}
	workers := make([]*topology.Cluster, 0, len(members)-1)
	for _, m := range members {
		if m.role == topology.RoleWorker {
			workers = append(workers, m.cluster)
		}
	}
	return members[0].cluster, workers, nil
}

func serverForManager(c existing.Cluster) string {
	if c.ManagerServer != "" {
		return c.ManagerServer
	}
	return c.Config.Host
}

// members lists the manager then the workers with their kind names.
func (p *Provider) members(spec topology.Spec) ([]*member, error) {
	kn, err := p.opts.kindName("topology.Options.ManagerName", spec.ManagerName)
	if err != nil {
		return nil, err
	}
	out := []*member{{name: spec.ManagerName, kindName: kn, role: topology.RoleManager}}
	for i, w := range spec.WorkerNames {
		kn, err := p.opts.kindName(fmt.Sprintf("topology.Options.WorkerNames[%d]", i), w)
		if err != nil {
			return nil, err
		}
		out = append(out, &member{name: w, kindName: kn, role: topology.RoleWorker})
	}
	return out, nil
}

// kindProvider is a kind provider whose messages name the cluster.
func (p *Provider) kindProvider(progress io.Writer, kindName string) *cluster.Provider {
	return cluster.NewProvider(p.rt.option, cluster.ProviderWithLogger(newLogger(progress, kindName)))
}

// createOrReuse reuses the kind clusters that exist (kind's List) and
// creates the others, Options.Parallel at a time. A cluster is recorded as
// created before its creation starts, so that Close deletes it whatever
// happens.
func (p *Provider) createOrReuse(ctx context.Context, members []*member, progress io.Writer) error {
	have, err := p.kindProvider(progress, "").List()
	if err != nil {
		return fmt.Errorf("kind: listing clusters with %s: %s", p.rt, redact.String(err.Error()))
	}
	create := 0
	for _, m := range members {
		if !slices.Contains(have, m.kindName) {
			create++
		}
	}
	if uid, ok := nodesUID(ctx, p.rt); ok && create > 0 {
		if err := inotify.Check(fmt.Sprintf("kind: %d new kind nodes (about %d each)", create, inotifyPerNode), create*inotifyPerNode, uid); err != nil {
			return err
		}
	}
	g := &errgroup.Group{}
	g.SetLimit(p.parallel())
	errs := make([]error, len(members))
	for i, m := range members {
		if slices.Contains(have, m.kindName) {
			m.reused = true
			p.mu.Lock()
			p.reused = append(p.reused, m.kindName)
			p.mu.Unlock()
			fmt.Fprintf(progress, "kind: %s cluster %q: kind cluster %q exists: reusing it (it will not be deleted)\n", m.role, m.name, m.kindName)
			continue
		}
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				errs[i] = fmt.Errorf("kind: cluster %q not created: %w", m.kindName, context.Cause(ctx))
				return nil
			}
			p.mu.Lock()
			p.created = append(p.created, m.kindName)
			dir := p.dir
			p.mu.Unlock()
			start := time.Now()
			fmt.Fprintf(progress, "kind: %s cluster %q: creating kind cluster %q (image %s)\n", m.role, m.name, m.kindName, p.opts.NodeImage)
			err := p.kindProvider(progress, m.kindName).Create(m.kindName,
				cluster.CreateWithV1Alpha4Config(ClusterConfig(m.kindName, m.name, m.role, p.opts)),
				cluster.CreateWithNodeImage(p.opts.NodeImage),
				cluster.CreateWithWaitForReady(p.opts.WaitForReady),
				// Always a file of ours: without it kind merges the cluster
				// into the user's ~/.kube/config.
				cluster.CreateWithKubeconfigPath(m.kubeconfigPath(dir)),
				cluster.CreateWithDisplayUsage(false),
				cluster.CreateWithDisplaySalutation(false),
			)
			if err != nil {
				errs[i] = fmt.Errorf("kind: creating cluster %q for %s cluster %q: %s", m.kindName, m.role, m.name, redact.String(err.Error()))
				return nil
			}
			took := time.Since(start)
			p.mu.Lock()
			if p.took == nil {
				p.took = map[string]time.Duration{}
			}
			p.took[m.kindName] = took
			p.mu.Unlock()
			fmt.Fprintf(progress, "kind: %s cluster %q: kind cluster %q ready in %s\n", m.role, m.name, m.kindName, took.Round(time.Second))
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// loadImages saves the planned images present in the local runtime and
// loads them into the nodes of the clusters that need them, and records
// what was and was not loaded.
func (p *Provider) loadImages(ctx context.Context, members []*member, plan imagePlan, progress io.Writer) error {
	all := plan.images()
	var report []ImageLoad
	defer func() {
		p.mu.Lock()
		p.images = report
		p.mu.Unlock()
	}()
	if p.opts.SkipImageLoad {
		for _, img := range all {
			report = append(report, ImageLoad{Image: img, NotLoaded: "Options.SkipImageLoad"})
		}
		fmt.Fprintf(progress, "kind: loading no images (Options.SkipImageLoad); the nodes pull %d images\n", len(all))
		return nil
	}
	dir := filepath.Join(p.Dir(), "images")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("kind: %w", err)
	}
	defer os.RemoveAll(dir)
	present, missing, err := saveLocal(ctx, p.rt, dir, all)
	if err != nil {
		return err
	}
	for _, img := range all {
		if why, ok := missing[img]; ok {
			report = append(report, ImageLoad{Image: img, NotLoaded: why})
			fmt.Fprintf(progress, "kind: image %s not loaded: %s; nodes will pull it\n", img, why)
		}
	}
	loaded := map[string][]string{}
	var mu sync.Mutex
	g := &errgroup.Group{}
	g.SetLimit(p.parallel())
	for _, m := range members {
		g.Go(func() error {
			nodeList, err := p.kindProvider(progress, m.kindName).ListInternalNodes(m.kindName)
			if err != nil {
				return fmt.Errorf("kind: cluster %q: listing nodes: %s", m.kindName, redact.String(err.Error()))
			}
			if len(nodeList) == 0 {
				return fmt.Errorf("kind: cluster %q: kind lists no nodes to load images into", m.kindName)
			}
			for _, img := range plan.forRole(m.role) {
				li, ok := present[img]
				if !ok {
					continue
				}
				if err := loadInto(m.kindName, nodeList, li); err != nil {
					return err
				}
				mu.Lock()
				loaded[img] = append(loaded[img], m.name)
				mu.Unlock()
			}
			return nil
		})
	}
	err = g.Wait()
	for _, img := range all {
		if cs, ok := loaded[img]; ok {
			slices.Sort(cs)
			report = append(report, ImageLoad{Image: img, Clusters: cs})
			fmt.Fprintf(progress, "kind: image %s loaded into %d clusters\n", img, len(cs))
		}
	}
	return err
}

// credentialsPlugin is what puts the connector's credentials plugin into the
// manager's Kueue pod: Options.CredentialsPlugin when set; else, when the
// connector's needs name the secretreader provider (connect.ClusterProfile),
// an image built here from the secretreader binary the local topology runs
// (nodeimage.EnsurePluginImage); nil when the connector needs none.
func (p *Provider) credentialsPlugin(ctx context.Context, needs topology.KueueNeeds, progress io.Writer) (*install.CredentialsPlugin, error) {
	if len(needs.CredentialsProviders) == 0 {
		return nil, nil
	}
	if p.opts.CredentialsPlugin != nil {
		return p.opts.CredentialsPlugin, nil
	}
	for i, cp := range needs.CredentialsProviders {
		if cp.Name != connect.SecretReaderProvider {
			return nil, fmt.Errorf("kind: the connector's credentials provider %d, %q: this provider builds an image for %q only; give its plugin's image in Options.CredentialsPlugin", i, cp.Name, connect.SecretReaderProvider)
		}
	}
	if p.rt.Name != RuntimeDocker {
		return nil, fmt.Errorf("kind: Options.CredentialsPlugin: nil, and the secretreader plugin's image is built with docker only (runtime %s): give an image", p.rt.Name)
	}
	bin, err := assets.SecretReader(ctx, assets.Options{Progress: progress})
	if err != nil {
		return nil, fmt.Errorf("kind: the ClusterProfile credentials plugin: %w", err)
	}
	ref, err := nodeimage.EnsurePluginImage(ctx, nodeimage.Options{Docker: p.rt.CLI, Progress: progress}, bin)
	if err != nil {
		return nil, fmt.Errorf("kind: %w", err)
	}
	repo, tag, _ := strings.Cut(ref, ":")
	return &install.CredentialsPlugin{Image: install.Image{Repository: repo, Tag: tag}, Source: nodeimage.PluginSource}, nil
}

// installAll installs JobSet (when its integration is on) and Kueue on every
// cluster with install.Step (the path topology/existing and topology/capz
// take: Helm, then Kueue's Deployment, webhook endpoints, leader Lease and
// a webhook that answers), then attaches each cluster.
func (p *Provider) installAll(ctx context.Context, spec topology.Spec, plugin *install.CredentialsPlugin, members []*member, progress io.Writer) error {
	o := p.opts
	step := install.Step{
		Kueue:  install.KueueOptions{Image: o.KueueImage, Timeout: o.InstallTimeout, CredentialsPlugin: plugin},
		JobSet: install.JobSetOptions{Image: o.JobSetImage, Timeout: o.InstallTimeout},
	}
	clusters := make([]*topology.Cluster, len(members)) // members[0] is the manager, as Step.Run wants
	for i, m := range members {
		clusters[i] = &topology.Cluster{Name: m.name, Config: m.attach.Config, ManagerServer: m.attach.ManagerServer}
	}
	if err := step.Run(ctx, spec, clusters, progress); err != nil {
		return fmt.Errorf("kind: %w", err)
	}
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			tc, err := existing.AttachCluster(ctx, m.attach, m.role, o.InstallTimeout)
			if err != nil {
				errs[i] = err
				return
			}
			tc.Kubeconfig = m.kubeconfig
			m.cluster = tc
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close implements topology.Provider: it deletes the kind clusters this
// provider created (unless Options.Keep), never the reused ones, and removes
// its temporary directory. Safe after a failed Provision and more than once.
func (p *Provider) Close(context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	created, dir, progress, network := slices.Clone(p.created), p.dir, p.progress, p.network
	p.mu.Unlock()
	if progress == nil {
		progress = io.Discard
	}
	var errs []error
	if p.opts.Keep {
		if len(created) > 0 {
			fmt.Fprintf(progress, "kind: keeping clusters %v (Options.Keep); delete them with `kind delete clusters %s`\n", created, strings.Join(created, " "))
		}
	} else {
		g := &errgroup.Group{}
		g.SetLimit(p.parallel())
		errs = make([]error, len(created))
		for i, kn := range created {
			g.Go(func() error {
				// The kubeconfig path is ours (a cluster is recorded as
				// created only once the directory exists): kind removes the
				// cluster's entry from it, never from ~/.kube/config.
				if err := p.kindProvider(progress, kn).Delete(kn, filepath.Join(dir, kn+".kubeconfig")); err != nil {
					errs[i] = fmt.Errorf("kind: deleting cluster %q: %s", kn, redact.String(err.Error()))
					return nil
				}
				fmt.Fprintf(progress, "kind: deleted cluster %q\n", kn)
				return nil
			})
		}
		_ = g.Wait()
		if network != "" && len(created) > 0 {
			p.removeNetwork(network, progress)
		}
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("kind: removing %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// kindNetwork is the container network kind puts its nodes on: "kind", or
// what KIND_EXPERIMENTAL_DOCKER_NETWORK says, as kind reads it.
func kindNetwork() string {
	if n := os.Getenv("KIND_EXPERIMENTAL_DOCKER_NETWORK"); n != "" {
		return n
	}
	return "kind"
}

// claimNetwork records that Close may remove kind's container network:
// when it does not exist yet (kind will create it for these clusters; the
// marker file, nodeimage.NetworkMarker, says so to the providers of other
// test binaries), or when the marker says the testkit's clusters made it.
func (p *Provider) claimNetwork(ctx context.Context, network string) {
	marker, err := nodeimage.NetworkMarker(nodeimage.Options{}, network)
	if err != nil {
		marker = ""
	}
	absent := exec.CommandContext(ctx, p.rt.CLI, "network", "inspect", network).Run() != nil
	if !absent {
		if marker == "" {
			return
		}
		if _, err := os.Stat(marker); err != nil {
			return // there before the testkit's clusters: never removed
		}
	} else if marker != "" && os.MkdirAll(filepath.Dir(marker), 0o755) == nil {
		_ = os.WriteFile(marker, []byte("kind's network "+network+", created for multikueue-testkit's kind clusters; removed with it\n"), 0o644)
	}
	p.mu.Lock()
	p.network, p.networkMarker = network, marker
	p.mu.Unlock()
}

// removeNetwork removes kind's network, which kind creates and never
// deletes, when claimNetwork claimed it and no container is on it any more
// (the last provider to close removes it), and its marker with it.
func (p *Provider) removeNetwork(network string, progress io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, p.rt.CLI, "network", "inspect", "--format", "{{len .Containers}}", network).Output()
	if err != nil || strings.TrimSpace(string(out)) != "0" {
		return
	}
	if err := exec.CommandContext(ctx, p.rt.CLI, "network", "rm", network).Run(); err == nil {
		fmt.Fprintf(progress, "kind: removed network %q (created by kind for the testkit's clusters)\n", network)
		p.mu.Lock()
		marker := p.networkMarker
		p.mu.Unlock()
		if marker != "" {
			_ = os.Remove(marker)
		}
	}
}
