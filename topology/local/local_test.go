package local_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/multikueue-testkit/testkit/internal/assets"
	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
)

func TestMissingBinaryIsOneClearError(t *testing.T) {
	t.Setenv(assets.EnvAssets, t.TempDir())
	_, err := local.New(context.Background(), topology.Options{Workers: 1}, local.Options{})
	if !errors.Is(err, assets.ErrNotFound) || !strings.Contains(err.Error(), assets.EnvAssets) {
		t.Fatalf("want a not-found error naming %s, got %v", assets.EnvAssets, err)
	}
	t.Log(err)
}

func TestBadInputFailsBeforeStartingAnything(t *testing.T) {
	_, err := local.New(context.Background(), topology.Options{Workers: 21}, local.Options{})
	if err == nil || !strings.Contains(err.Error(), "Options.Workers") {
		t.Fatalf("got %v", err)
	}
}

// TestTwoTopologiesAndLifecycle starts two topologies in one process at once
// (ports must not collide), then stops and restarts one worker's API server
// and Kueue, and finally checks that teardown leaves no process or directory.
func TestTwoTopologiesAndLifecycle(t *testing.T) {
	ctx := context.Background()
	topos := make([]*topology.Topology, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range topos {
		wg.Go(func() {
			topos[i], errs[i] = local.New(ctx, topology.Options{Workers: 1}, local.Options{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("topology %d: %v", i, err)
		}
		topos[i].CloseWith(t)
	}
	a, b := topos[0], topos[1]
	if a.Manager.Config.Host == b.Manager.Config.Host || a.Workers[0].Config.Host == b.Workers[0].Config.Host {
		t.Fatalf("two topologies share an API server address")
	}

	w := a.Workers[0]
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "survives-restart"}}
	if err := w.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := w.Lifecycle.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err == nil {
		t.Fatal("API server still answers after StopAPIServer")
	}
	if err := w.Lifecycle.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err != nil {
		t.Fatalf("data lost across an API server restart: %v", err)
	}
	if err := w.Lifecycle.StopKueue(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Lifecycle.StartKueue(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitActive(ctx); err != nil {
		t.Fatalf("setup not Active after restarts: %v", err)
	}

	dir := a.Provider().(*local.Provider).Dir()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	err := poll.Until(ctx, 10*time.Second, "processes of the closed topology to be gone", func(context.Context) error {
		if left := local.ProcessesUnder(dir); len(left) > 0 {
			return errors.New("still running")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory %s survived Close", dir)
	}
	if err := b.WaitActive(ctx); err != nil {
		t.Fatalf("closing one topology disturbed the other: %v", err)
	}
}
