// Command mktk prepares and runs local MultiKueue topologies.
//
//	mktk assets                    build or locate kube-apiserver, etcd, kube-controller-manager,
//	                               kube-scheduler, the KWOK controller and kueue
//	mktk -envtest assets           only kube-apiserver and etcd, for envtest's KUBEBUILDER_ASSETS
//	mktk up --workers 3            start 1 manager + 3 workers and keep them up until Ctrl-C
//	mktk scale --workers 2,5,10,19 --jobs 200 --out DIR
//	                               scale runs: per N, a smoke gate then the load; JSONL, plots, report.html
//	mktk matrix --kueue v0.18.4,v0.19.2 --workers 2 --out DIR
//	                               every scenario and finding probe per Kueue version: matrix.json, .md, .html
//	mktk kind probe                can this Docker Engine run kind's node containers? (offline base image)
//	mktk kind host enable|disable  register or remove the mktk-runc runtime shim kind needs on hosts
//	                               whose capability bounding set is short
//
// assets builds kube-apiserver, etcd, kube-controller-manager, kube-scheduler,
// the KWOK controller and Kueue from the Go module proxy (or finds them in
// $KUBEBUILDER_ASSETS or the cache) and prints the directory of the first
// two, ready to export as KUBEBUILDER_ASSETS. See `mktk up -h`, `mktk scale -h` and `mktk matrix -h` for the others.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/topology/kind/nodeimage"
	"github.com/multikueue-testkit/testkit/topology/local"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "up":
			return up(args[1:], stdout, stderr)
		case "scale":
			return scale(args[1:], stdout, stderr)
		case "matrix":
			return matrixCmd(args[1:], stdout, stderr)
		case "kind":
			return kindCmd(args[1:], stdout, stderr)
		}
	}
	return assetsCmd(args, stdout, stderr)
}

// parseNoArgs parses args into fs's flags and wants no argument after them;
// false when they do not parse (fs said why) or leave one (said on stderr).
func parseNoArgs(fs *flag.FlagSet, args []string, stderr io.Writer) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return false
	}
	return true
}

// assetsCmd is `mktk [flags] assets`.
func assetsCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mktk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kube := fs.String("kubernetes-version", assets.DefaultKubernetesVersion, "kube-apiserver version to build")
	etcd := fs.String("etcd-version", assets.DefaultEtcdVersion, "etcd version to build")
	cache := fs.String("cache-dir", "", "where built binaries are kept (default: $"+assets.EnvCacheDir+" or the user cache dir)")
	kueue := fs.String("kueue-version", "", "Kueue versions to build, comma-separated (default: $"+assets.EnvKueueVersion+", else "+assets.DefaultKueueVersion+"); \"none\" builds no Kueue")
	kueueSrc := fs.String("kueue-source", "", "a Kueue checkout to build instead (default: $"+assets.EnvKueueSource+")")
	envtest := fs.Bool("envtest", false, "build or locate only kube-apiserver and etcd, what envtest's "+assets.EnvAssets+" needs (no kube-controller-manager, kube-scheduler, KWOK or Kueue)")
	node := fs.Bool("kind-node", false, "also build what the offline kind node image carries: kubelet, kubeadm, kubectl, kube-proxy, crictl, the CNI plugins and CoreDNS")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mktk [flags] assets | mktk up [flags] | mktk scale [flags] | mktk matrix [flags]\n\nflags of assets:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || fs.Arg(0) != "assets" {
		fs.Usage()
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	b, err := assets.Ensure(ctx, assets.Options{KubernetesVersion: *kube, EtcdVersion: *etcd, CacheDir: *cache, Progress: stderr, ControlPlaneOnly: *envtest})
	if err != nil {
		fmt.Fprintln(stderr, "mktk:", err)
		return 1
	}
	if *envtest {
		fmt.Fprintf(stderr, "mktk: kube-apiserver and etcd (%s) in (for %s):\n", b.Source, assets.EnvAssets)
		fmt.Fprintln(stdout, filepath.Dir(b.APIServer))
		return 0
	}
	fmt.Fprintf(stderr, "mktk: kube-controller-manager: %s\n", b.ControllerManager)
	// Every local worker runs kube-scheduler and a KWOK controller.
	o := assets.Options{KubernetesVersion: *kube, EtcdVersion: *etcd, CacheDir: *cache, Progress: stderr}
	sched, err := assets.EnsureScheduler(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "mktk:", err)
		return 1
	}
	fmt.Fprintf(stderr, "mktk: kube-scheduler: %s\n", sched)
	kwok, err := assets.EnsureOperator(ctx, o, assets.KWOKController(), local.KWOKVersion)
	if err != nil {
		fmt.Fprintln(stderr, "mktk:", err)
		return 1
	}
	fmt.Fprintf(stderr, "mktk: kwok %s (%s): %s\n", kwok.Version, kwok.From, kwok.Path)
	if *kueue != "none" {
		versions := strings.Split(*kueue, ",")
		for _, v := range versions {
			k, err := assets.EnsureKueue(ctx, assets.Options{CacheDir: *cache, Progress: stderr}, assets.KueueOptions{Version: strings.TrimSpace(v), Source: *kueueSrc})
			if err != nil {
				fmt.Fprintln(stderr, "mktk:", err)
				return 1
			}
			fmt.Fprintf(stderr, "mktk: kueue %s (%s): %s\n", k.Version, k.From, k.Path)
			if *kueueSrc != "" {
				break
			}
		}
	}
	if *node {
		if err := nodeAssets(ctx, o, stderr); err != nil {
			fmt.Fprintln(stderr, "mktk:", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "mktk: kube-apiserver and etcd (%s) in:\n", b.Source)
	fmt.Fprintln(stdout, filepath.Dir(b.APIServer))
	return 0
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// nodeAssets builds (or finds) what the offline kind node image carries.
func nodeAssets(ctx context.Context, o assets.Options, stderr io.Writer) error {
	nb, err := assets.EnsureNodeBinaries(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "mktk: kubelet %s, kubeadm %s, kubectl %s, kube-proxy %s\n", nb.Kubelet, nb.Kubeadm, nb.Kubectl, nb.KubeProxy)
	specs := append([]assets.OperatorSpec{assets.CRICtl(), assets.CoreDNS()}, assets.CNIPlugins()...)
	versions := map[string]string{"crictl": nodeimage.CRICtlVersion, "coredns": nodeimage.CoreDNSVersion}
	for _, s := range specs {
		v := versions[s.Name]
		if v == "" {
			v = nodeimage.CNIPluginsVersion
		}
		op, err := assets.EnsureOperator(ctx, o, s, v)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "mktk: %s %s (%s): %s\n", op.Name, op.Version, op.From, op.Path)
	}
	return nil
}
