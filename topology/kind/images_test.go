package kind

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
)

func TestPlanImages(t *testing.T) {
	p := planImages("k/kueue:v1", "", nil)
	if got := p.forRole(topology.RoleManager); !slices.Equal(got, []string{"k/kueue:v1"}) {
		t.Errorf("manager images %v, want Kueue's only (its jobs are suspended)", got)
	}
	if got := p.forRole(topology.RoleWorker); !slices.Equal(got, []string{"k/kueue:v1", topology.DefaultJobImage}) {
		t.Errorf("worker images %v, want Kueue's and the job image", got)
	}
	p = planImages("k/kueue:v1", "j/jobset:v2", []string{"my/app:3", topology.DefaultJobImage})
	if got := p.forRole(topology.RoleManager); !slices.Equal(got, []string{"j/jobset:v2", "k/kueue:v1"}) {
		t.Errorf("manager images with JobSet %v", got)
	}
	if got := p.forRole(topology.RoleWorker); !slices.Equal(got, []string{"j/jobset:v2", "k/kueue:v1", "my/app:3", topology.DefaultJobImage}) {
		t.Errorf("worker images with JobSet and extras %v (each once)", got)
	}
}

// The images loaded are the ones topology/install's Deployments name.
func TestControllerImagesAreTheChartsOnes(t *testing.T) {
	ctx := context.Background()
	spec, err := topology.Options{Workers: 1}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	o, _ := Options{}.withDefaults()
	k, j, err := controllerImages(ctx, spec, topology.KueueNeeds{}, o, true)
	if err != nil {
		t.Fatal(err)
	}
	if k != install.KueueImage+":v0.19.2" {
		t.Errorf("Kueue image %q, want %s:v0.19.2", k, install.KueueImage)
	}
	if j != install.JobSetImage+":v0.12.0" {
		t.Errorf("JobSet image %q, want %s:v0.12.0", j, install.JobSetImage)
	}
	o.KueueImage = install.Image{Repository: "example.com/kueue", Tag: "dev"}
	k, j, err = controllerImages(ctx, spec, topology.KueueNeeds{}, o, false)
	if err != nil || k != "example.com/kueue:dev" || j != "" {
		t.Errorf("override: %q, %q, %v", k, j, err)
	}
}

func TestSaveLocalSplitsPresentAndMissing(t *testing.T) {
	fakeDocker(t, "no-kind")
	rt, err := Detect(context.Background(), RuntimeDocker)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	present, missing, err := saveLocal(context.Background(), rt, dir, []string{"absent/image:1", "present/image:1"})
	if err != nil {
		t.Fatal(err)
	}
	li, ok := present["present/image:1"]
	if !ok || li.id != "sha256:0123" {
		t.Fatalf("present = %+v", present)
	}
	if b, err := os.ReadFile(li.archive); err != nil || !strings.Contains(string(b), "fake-archive") {
		t.Errorf("archive %s: %q, %v", li.archive, b, err)
	}
	if why := missing["absent/image:1"]; !strings.Contains(why, "not present in the local docker images") {
		t.Errorf("missing = %v", missing)
	}
	if len(present) != 1 || len(missing) != 1 {
		t.Errorf("present %v, missing %v", present, missing)
	}
}

func TestImageLoadString(t *testing.T) {
	if s := (ImageLoad{Image: "a:1", Clusters: []string{"manager", "worker-1"}}).String(); s != "a:1: loaded into manager, worker-1" {
		t.Error(s)
	}
	if s := (ImageLoad{Image: "b:2", NotLoaded: "absent"}).String(); s != "b:2: not loaded (absent)" {
		t.Error(s)
	}
}
