package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

// up is `mktk up`: it starts a local topology, writes each cluster's admin
// kubeconfig (0600, in a 0700 temp dir), prints where they are and the
// export KUBECONFIG lines, and keeps the clusters up until SIGINT or
// SIGTERM; then it tears them down and removes the kubeconfigs.
func up(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mktk up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workers := fs.Int("workers", 3, "number of worker clusters (1–20)")
	nodes := fs.Int("nodes", 1, "KWOK Nodes per worker (each holding its share of the worker's quota): kube-scheduler binds pods to them, KWOK runs them")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mktk up [--workers N] [--nodes N]\n\nStarts 1 manager + N workers (the local topology) and keeps them up until Ctrl-C.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseNoArgs(fs, args, stderr) {
		return 2
	}
	if *nodes < 1 {
		fmt.Fprintf(stderr, "mktk up: --nodes: %d; want 1 or more (a worker without Nodes runs no pod)\n", *nodes)
		return 2
	}
	lo := local.Options{Nodes: &local.Nodes{Count: *nodes}}
	ctx, stop := signalContext()
	defer stop()
	if err := runUp(ctx, *workers, lo, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "mktk up:", err)
		return 1
	}
	return 0
}

func runUp(ctx context.Context, workers int, lo local.Options, stdout, stderr io.Writer) (err error) {
	start := time.Now()
	fmt.Fprintf(stderr, "mktk: starting 1 manager + %d worker(s)\n", workers)
	topo, err := local.New(ctx, topology.Options{Workers: workers, Progress: stderr}, lo)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(stderr, "mktk: tearing down")
		err = errors.Join(err, topo.Close(context.WithoutCancel(ctx)))
	}()
	dir, err := os.MkdirTemp("", "mktk-up-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	var paths []string
	for _, c := range topo.Clusters() {
		p := filepath.Join(dir, c.Name+".kubeconfig")
		kc, err := uniqueUser(c)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, kc, 0o600); err != nil {
			return err
		}
		paths = append(paths, p)
	}
	kv := topo.Facts.Version
	if kv == "" {
		kv = "of unknown version"
	}
	fmt.Fprintf(stdout, "# 1 manager + %d worker(s) Active in %s, Kueue %s; kubeconfigs (admin, contexts named after the clusters):\n", workers, time.Since(start).Round(100*time.Millisecond), kv)
	for i, c := range topo.Clusters() {
		fmt.Fprintf(stdout, "#   %-10s %s\n", c.Name, paths[i])
	}
	if p, ok := topo.Provider().(*local.Provider); ok {
		fmt.Fprintf(stdout, "# logs: %s/<cluster>/kueue.log, kube-apiserver.log\n", p.Dir())
	}
	fmt.Fprintf(stdout, "# %d KWOK Node(s) per worker: kubectl --context worker-1 get nodes; pods are bound by kube-scheduler and run by KWOK\n", lo.Nodes.Count)
	fmt.Fprintf(stdout, "# the manager:\nexport KUBECONFIG=%s\n", paths[0])
	fmt.Fprintf(stdout, "# or every cluster (kubectl --context worker-1 ...):\n# export KUBECONFIG=%s\n", strings.Join(paths, ":"))
	fmt.Fprintln(stdout, "# Ctrl-C stops the clusters and removes these files.")
	<-ctx.Done()
	return nil
}

// uniqueUser returns c's admin kubeconfig with its user renamed
// <cluster>-admin, so that the kubeconfigs can be merged (KUBECONFIG=a:b)
// without one cluster's credentials hiding another's.
func uniqueUser(c *topology.Cluster) ([]byte, error) {
	cfg, err := clientcmd.Load(c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: kubeconfig: %w", c.Name, err)
	}
	user := c.Name + "-admin"
	for name, ctx := range cfg.Contexts {
		if ai, ok := cfg.AuthInfos[ctx.AuthInfo]; ok {
			cfg.AuthInfos[user] = ai
			if ctx.AuthInfo != user {
				delete(cfg.AuthInfos, ctx.AuthInfo)
			}
			cfg.Contexts[name].AuthInfo = user
		}
	}
	return clientcmd.Write(*cfg)
}
