package workload

import (
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/multikueue-testkit/testkit/topology"
)

// DefaultImage is the container image of built Jobs and JobSets: the busybox
// of Kubernetes' own e2e tests (registry.k8s.io/e2e-test-images, a few MB,
// multi-arch). The container runs `sh -c "sleep <seconds>; exit <code>"`, so
// an image given with Image must have sh and a sleep that takes fractional
// seconds.
const DefaultImage = topology.DefaultJobImage

// DefaultRunDuration is how long a built job runs when RunFor is not called,
// on a kubelet and on the local topology's KWOK Nodes alike
// (local.DefaultRunDuration is the same).
const DefaultRunDuration = time.Second

// containerName is the one container of a built pod template.
const containerName = "c"

// run is what a built job's pod does on a kubelet; the builders write the
// same as annotations, which the local topology's KWOK Stage reads.
type run struct {
	image    string
	duration time.Duration
	fails    bool
}

func newRun() run { return run{image: DefaultImage, duration: DefaultRunDuration} }

// command is the container command: sleep for the run duration, then exit 0,
// or 1 when the job fails.
func (r run) command() []string {
	code := 0
	if r.fails {
		code = 1
	}
	secs := strconv.FormatFloat(r.duration.Seconds(), 'f', -1, 64)
	return []string{"sh", "-c", fmt.Sprintf("sleep %s; exit %d", secs, code)}
}

// applyTo makes pod spec's single container run r, with no restarts.
func (r run) applyTo(spec *corev1.PodSpec) {
	spec.RestartPolicy = corev1.RestartPolicyNever
	c := &spec.Containers[0]
	c.Image = r.image
	c.Command = r.command()
	c.Args = nil
}

// oneTaskJobSpec is a Job spec of one pod with one container, no retries
// (backoffLimit 0, so one failed pod fails the Job) and no resource requests.
func oneTaskJobSpec(suspend bool) batchv1.JobSpec {
	spec := batchv1.JobSpec{
		Parallelism:  ptr.To[int32](1),
		Completions:  ptr.To[int32](1),
		BackoffLimit: ptr.To[int32](0),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: containerName}},
		}},
	}
	newRun().applyTo(&spec.Template.Spec)
	if suspend {
		spec.Suspend = ptr.To(true)
	}
	return spec
}
