package workload

import (
	"encoding/json"

	aw "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// AppWrapperBuilder builds an AppWrapper (workload.codeflare.dev/v1beta2),
// created suspended as Kueue expects, wrapping one batch/v1 Job "<name>-job"
// whose pods run like a built Job's (Replicas of them, each sleeping for the
// run duration and exiting 0, or 1 with Fails; restartPolicy Never,
// backoffLimit 0; with Fails the AppWrapper fails with its Job, no grace
// period and no retries — within about a minute of its pod failing: the
// AppWrapper controller v1.2.2 is woken by pods that succeed, and sees a
// failed pod on its one-minute requeue). Kueue's webhook sets spec.managedBy
// on the manager. The
// component declares its pod set (path template.spec.template), so Kueue
// and the AppWrapper controller agree on it. It needs the topology's
// AppWrapper integration (topology.IntegrationAppWrapper).
type AppWrapperBuilder struct {
	core
	aw       aw.AppWrapper
	replicas int32
}

// NewAppWrapper starts an AppWrapper of one Job of one pod that runs for
// DefaultRunDuration and succeeds.
func NewAppWrapper(name, namespace string) *AppWrapperBuilder {
	b := &AppWrapperBuilder{
		aw: aw.AppWrapper{
			TypeMeta:   metav1.TypeMeta{APIVersion: aw.GroupVersion.String(), Kind: "AppWrapper"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec:       aw.AppWrapperSpec{Suspend: true},
		},
		replicas: 1,
	}
	b.core = newCore("AppWrapper", name)
	return b
}

// Replicas sets how many pods the wrapped Job runs at once and to
// completion (its parallelism and completions; at least 1).
func (b *AppWrapperBuilder) Replicas(n int32) *AppWrapperBuilder {
	if b.count("Replicas", n, 1) {
		b.replicas = n
	}
	return b
}

// Obj returns a copy of the AppWrapper built so far.
func (b *AppWrapperBuilder) Obj() *aw.AppWrapper {
	a := b.aw.DeepCopy()
	b.finishMeta(&a.ObjectMeta)
	if b.run.fails {
		// Fail at once: the AppWrapper controller otherwise waits a minute
		// after the failure and retries 3 times, 90 s apart (its defaults).
		a.Annotations[aw.RetryLimitAnnotation] = "0"
		a.Annotations[aw.FailureGracePeriodDurationAnnotation] = "0s"
	}
	job := batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: b.name + "-job"},
		Spec:       oneTaskJobSpec(false),
	}
	job.Spec.Parallelism, job.Spec.Completions = ptr.To(b.replicas), ptr.To(b.replicas)
	b.finishRun(&job.Spec.Template)
	raw, err := componentJSON(&job)
	if err != nil {
		b.fail("Obj", "marshal the wrapped Job: %v", err)
		return a
	}
	a.Spec.Components = []aw.AppWrapperComponent{{
		DeclaredPodSets: []aw.AppWrapperPodSet{{Replicas: ptr.To(b.replicas), Path: "template.spec.template"}},
		Template:        runtime.RawExtension{Raw: raw},
	}}
	return a
}

// componentJSON marshals a component without the null creationTimestamp
// that metav1.ObjectMeta writes, which the AppWrapper's schema refuses.
func componentJSON(obj any) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	dropNullTimestamps(m)
	return json.Marshal(m)
}

// dropNullTimestamps removes every "creationTimestamp": null in v.
func dropNullTimestamps(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if k == "creationTimestamp" && x == nil {
				delete(t, k)
				continue
			}
			dropNullTimestamps(x)
		}
	case []any:
		for _, x := range t {
			dropNullTimestamps(x)
		}
	}
}
