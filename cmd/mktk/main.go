// Command mktk prepares what the local topology needs ahead of time.
//
//	go run github.com/multikueue-testkit/testkit/cmd/mktk assets
//
// builds kube-apiserver, etcd and kube-controller-manager from the Go module
// proxy (or finds them in $KUBEBUILDER_ASSETS or the cache) and prints the
// directory of the first two, ready to export as KUBEBUILDER_ASSETS.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/multikueue-testkit/testkit/internal/assets"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("mktk", flag.ContinueOnError)
	kube := fs.String("kubernetes-version", assets.DefaultKubernetesVersion, "kube-apiserver version to build")
	etcd := fs.String("etcd-version", assets.DefaultEtcdVersion, "etcd version to build")
	cache := fs.String("cache-dir", "", "where built binaries are kept (default: $"+assets.EnvCacheDir+" or the user cache dir)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mktk [flags] assets\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || fs.Arg(0) != "assets" {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	b, err := assets.Ensure(ctx, assets.Options{KubernetesVersion: *kube, EtcdVersion: *etcd, CacheDir: *cache, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mktk:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "mktk: kube-controller-manager: %s\n", b.ControllerManager)
	fmt.Fprintf(os.Stderr, "mktk: kube-apiserver and etcd (%s) in:\n", b.Source)
	fmt.Println(filepath.Dir(b.APIServer))
	return 0
}
