package workload_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/local"
	"github.com/multikueue-testkit/testkit/workload"
)

func TestJobDefaultsRunOnAKubeletAsInTheExecutor(t *testing.T) {
	job := workload.NewJob("j", "ns").Obj()
	if job.Spec.Suspend == nil || !*job.Spec.Suspend {
		t.Error("a built Job must be created suspended")
	}
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 {
		t.Errorf("backoffLimit = %v, want 0", job.Spec.BackoffLimit)
	}
	pod := job.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %q, want Never", pod.RestartPolicy)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != workload.DefaultImage {
		t.Errorf("image = %q, want %q", c.Image, workload.DefaultImage)
	}
	if diff := cmp.Diff([]string{"sh", "-c", "sleep 1; exit 0"}, c.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if len(c.Args) != 0 {
		t.Errorf("args = %q, want none", c.Args)
	}
	if len(job.Annotations) != 0 {
		t.Errorf("annotations = %v, want none (the default run)", job.Annotations)
	}
	if workload.DefaultRunDuration != local.DefaultRunDuration {
		t.Errorf("workload.DefaultRunDuration %s != local.DefaultRunDuration %s: a pod on KWOK and a RayJob on the dashboard stand-in would run for different times",
			workload.DefaultRunDuration, local.DefaultRunDuration)
	}
}

func TestJobRunForFailsImage(t *testing.T) {
	job := workload.NewJob("j", "ns").RunFor(1500 * time.Millisecond).Fails().Image("example.com/tools:1").Obj()
	want := map[string]string{
		topology.AnnotationRunDuration: "1.5s",
		topology.AnnotationOutcome:     topology.OutcomeFailed,
	}
	if diff := cmp.Diff(want, job.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if diff := cmp.Diff([]string{"sh", "-c", "sleep 1.5; exit 1"}, c.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if c.Image != "example.com/tools:1" {
		t.Errorf("image = %q", c.Image)
	}
	if *job.Spec.BackoffLimit != 0 || job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("a failing Job must not be retried: backoffLimit %d, restartPolicy %q", *job.Spec.BackoffLimit, job.Spec.Template.Spec.RestartPolicy)
	}
}

func TestRunForDurationsAsSleepSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                      "sleep 0; exit 0",
		200 * time.Millisecond: "sleep 0.2; exit 0",
		time.Second:            "sleep 1; exit 0",
		time.Hour:              "sleep 3600; exit 0",
	} {
		job := workload.NewJob("j", "ns").RunFor(d).Obj()
		if got := job.Spec.Template.Spec.Containers[0].Command[2]; got != want {
			t.Errorf("RunFor(%s): %q, want %q", d, got, want)
		}
		if got := job.Annotations[topology.AnnotationRunDuration]; got != d.String() {
			t.Errorf("RunFor(%s): annotation %q", d, got)
		}
	}
}

func TestRunForNegativeIsAnErrorNamingTheField(t *testing.T) {
	b := workload.NewJob("j", "ns").RunFor(time.Second).RunFor(-time.Second)
	if err := b.Err(); err == nil || !containsAll(err.Error(), `Job "j"`, "RunFor", "-1s", "negative") {
		t.Errorf("Err() = %v, want an error naming the Job, RunFor and -1s", err)
	}
	if got := b.Obj().Annotations[topology.AnnotationRunDuration]; got != "1s" {
		t.Errorf("after a bad RunFor the annotation is %q, want the last good 1s", got)
	}
}

func TestJobQueueRequestsLabels(t *testing.T) {
	job := workload.NewJob("j", "ns").Queue("lq").Requests("500m", "1Gi").WorkloadPriorityClass("high").Obj()
	// Literal keys on purpose: they are what Kueue reads.
	if got := job.Labels["kueue.x-k8s.io/queue-name"]; got != "lq" {
		t.Errorf("queue label = %q", got)
	}
	if got := job.Labels["kueue.x-k8s.io/priority-class"]; got != "high" {
		t.Errorf("priority class label = %q", got)
	}
	req := job.Spec.Template.Spec.Containers[0].Resources.Requests
	if !req.Cpu().Equal(resource.MustParse("500m")) || !req.Memory().Equal(resource.MustParse("1Gi")) {
		t.Errorf("requests = %v", req)
	}
	only := workload.NewJob("j", "ns").Requests("", "1Gi").Obj().Spec.Template.Spec.Containers[0].Resources.Requests
	if _, ok := only[corev1.ResourceCPU]; ok || len(only) != 1 {
		t.Errorf(`Requests("", "1Gi") = %v, want memory only`, only)
	}
}

func TestObjReturnsAnIndependentCopy(t *testing.T) {
	b := workload.NewJob("j", "ns").RunFor(time.Second)
	first := b.Obj()
	first.Annotations["x"] = "y"
	first.Spec.Template.Spec.Containers[0].Command[2] = "changed"
	second := b.Fails().Obj()
	if _, ok := second.Annotations["x"]; ok {
		t.Error("changing one Obj changed the builder")
	}
	if got := second.Spec.Template.Spec.Containers[0].Command[2]; got != "sleep 1; exit 1" {
		t.Errorf("second Obj command %q", got)
	}
}

func TestJobSetRunsAsAJob(t *testing.T) {
	js := workload.NewJobSet("s", "ns").Queue("lq").Replicas(2).Requests("1", "").RunFor(2 * time.Second).Fails().Obj()
	if js.Spec.Suspend == nil || !*js.Spec.Suspend {
		t.Error("a built JobSet must be created suspended")
	}
	if got := js.Labels["kueue.x-k8s.io/queue-name"]; got != "lq" {
		t.Errorf("queue label = %q", got)
	}
	want := map[string]string{
		topology.AnnotationRunDuration: "2s",
		topology.AnnotationOutcome:     topology.OutcomeFailed,
	}
	rj := js.Spec.ReplicatedJobs[0]
	if diff := cmp.Diff(want, js.Annotations); diff != "" {
		t.Errorf("JobSet annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, rj.Template.Annotations); diff != "" {
		t.Errorf("Job template annotations (-want +got):\n%s", diff)
	}
	if rj.Replicas != 2 {
		t.Errorf("replicas = %d", rj.Replicas)
	}
	if rj.Template.Spec.Suspend != nil {
		t.Error("the Job template must not be suspended (JobSet suspends the JobSet)")
	}
	if *rj.Template.Spec.BackoffLimit != 0 || rj.Template.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Error("a failing JobSet's Jobs must not be retried")
	}
	c := rj.Template.Spec.Template.Spec.Containers[0]
	if diff := cmp.Diff([]string{"sh", "-c", "sleep 2; exit 1"}, c.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if c.Image != workload.DefaultImage || !c.Resources.Requests.Cpu().Equal(resource.MustParse("1")) {
		t.Errorf("container = %+v", c)
	}
	if img := workload.NewJobSet("s", "ns").Image("example.com/x:1").Obj().Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image; img != "example.com/x:1" {
		t.Errorf("Image: %q", img)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
