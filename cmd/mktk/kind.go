package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/multikueue-testkit/testkit/topology/kind/nodeimage"
)

const kindUsage = `usage: mktk kind probe [--json] | mktk kind base | mktk kind node [--kubernetes-version V] | mktk kind host enable|disable [--config FILE]

  probe         can this Docker Engine run kind's node containers? Builds (or loads) the
                offline base image, starts a node container as kind does, waits for systemd
                and containerd, runs a container inside it; prints the report (Markdown, or
                JSON with --json) and exits 0 when kind can run here, 1 when not
  base          build (or load from the cache) the offline kind base image; print its reference
  node          build (or load) the offline kind node image: the base, kubelet, kubeadm, kubectl,
                crictl, CNI, and kubeadm's images preloaded (every binary built from its Go
                module on a cold cache: tens of minutes); print its reference
  clean         remove from the engine the images the testkit made (the archives in the
                cache stay: the next run loads them)
  host enable   register the mktk-runc shim as the engine's default runtime (as root: it edits
                the daemon configuration, keeping the original, and reloads dockerd)
  host disable  restore the daemon configuration host enable kept

flags:
`

// kindCmd is `mktk kind ...`.
func kindCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mktk kind", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "probe: print the report as JSON")
	config := fs.String("config", nodeimage.DefaultDaemonConfig, "host: the Docker daemon's configuration file")
	kube := fs.String("kubernetes-version", "", "node: the Kubernetes version (default: the local topology's)")
	cache := fs.String("cache-dir", "", "where image archives and the shim are kept (default: the asset cache)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), kindUsage)
		fs.PrintDefaults()
	}
	if len(args) == 0 {
		fs.Usage()
		return 2
	}
	verb, rest := args[0], args[1:]
	var sub string
	if verb == "host" {
		if len(rest) == 0 {
			fs.Usage()
			return 2
		}
		sub, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "mktk kind %s: unexpected argument %q\n", verb, fs.Arg(0))
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	o := nodeimage.Options{CacheDir: *cache, Progress: stderr}
	switch {
	case verb == "probe":
		r, err := nodeimage.Probe(ctx, o)
		if err != nil {
			fmt.Fprintln(stderr, "mktk kind probe:", err)
			return 1
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(r); err != nil {
				fmt.Fprintln(stderr, "mktk kind probe:", err)
				return 1
			}
		} else {
			fmt.Fprint(stdout, r.Markdown())
		}
		if !r.CanRunKind {
			return 1
		}
		return 0
	case verb == "base":
		ref, err := nodeimage.EnsureBase(ctx, o)
		if err != nil {
			fmt.Fprintln(stderr, "mktk kind base:", err)
			return 1
		}
		fmt.Fprintln(stdout, ref)
		return 0
	case verb == "node":
		ref, err := nodeimage.EnsureNode(ctx, o, *kube)
		if err != nil {
			fmt.Fprintln(stderr, "mktk kind node:", err)
			return 1
		}
		fmt.Fprintln(stdout, ref)
		return 0
	case verb == "clean":
		removed, err := nodeimage.RemoveImages(ctx, o)
		for _, r := range removed {
			fmt.Fprintln(stdout, "removed", r)
		}
		if err != nil {
			fmt.Fprintln(stderr, "mktk kind clean:", err)
			return 1
		}
		return 0
	case verb == "host" && sub == "enable":
		if err := nodeimage.EnableShim(ctx, o, *config); err != nil {
			fmt.Fprintln(stderr, "mktk kind host enable:", err)
			return 1
		}
		return 0
	case verb == "host" && sub == "disable":
		if err := nodeimage.DisableShim(ctx, o, *config); err != nil {
			fmt.Fprintln(stderr, "mktk kind host disable:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "mktk kind: unknown command %q\n", verb+" "+sub)
	fs.Usage()
	return 2
}
