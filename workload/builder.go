package workload

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multikueue-testkit/testkit/topology"
)

// core is what every builder of the newer kinds shares: the object's
// labels and annotations, the requests and image of its pods' one
// container, the run of the kinds that finish, and the bad input it was
// given. A builder embeds core; its exported setters (Queue, Requests, …)
// are generated forwarders (builders_generated.go, from
// TestGeneratedForwarders) that return the builder itself; its Obj copies
// its object and calls finish* on the copy.
//
// Bad input never panics: the setter leaves the object as it was and records
// an error naming the builder, the object and the field; Err returns them.
type core struct {
	badInput
	labels      map[string]string
	annotations map[string]string
	requests    corev1.ResourceList
	image       string
	run         run
}

func newCore(kind, name string) core {
	return core{badInput: badInput{kind: kind, name: name}, labels: map[string]string{}, annotations: map[string]string{}, image: DefaultImage, run: newRun()}
}

// badInput is the bad input a builder was given: every setter that gets
// some leaves the object as it was and records an error naming the kind,
// the object and the field.
type badInput struct {
	kind, name string
	errs       []error
}

// fail records bad input for field.
func (b *badInput) fail(field string, format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("workload: %s %q: %s: %s", b.kind, b.name, field, fmt.Sprintf(format, args...)))
}

func (b *badInput) err() error { return errors.Join(b.errs...) }

// setRequests parses the quantities into *dst, or records why not and
// reports false.
func (b *badInput) setRequests(dst *corev1.ResourceList, cpu, memory string) bool {
	req, err := parseRequests(cpu, memory)
	if err != nil {
		b.fail("Requests", "%v", err)
		return false
	}
	*dst = req
	return true
}

// runFor records d in r, or why not.
func (b *badInput) runFor(r *run, d time.Duration) bool {
	if d < 0 {
		b.fail("RunFor", "%s: the run duration must not be negative", d)
		return false
	}
	r.duration = d
	return true
}

func (c *core) setQueue(q string)                 { c.labels[QueueLabel] = q }
func (c *core) setWorkloadPriorityClass(n string) { c.labels[PriorityClassLabel] = n }
func (c *core) setLabel(k, v string)              { c.labels[k] = v }
func (c *core) setAnnotation(k, v string)         { c.annotations[k] = v }

func (c *core) setRequests(cpu, memory string) { c.badInput.setRequests(&c.requests, cpu, memory) }

func (c *core) setImage(image string) {
	if image == "" {
		c.fail("Image", "the image must not be empty")
		return
	}
	c.image = image
}

func (c *core) setRunFor(d time.Duration) {
	if !c.runFor(&c.run, d) {
		return
	}
	c.annotations[topology.AnnotationRunDuration] = d.String()
}

func (c *core) setFails() {
	c.run.fails = true
	c.annotations[topology.AnnotationOutcome] = topology.OutcomeFailed
}

// count checks a replica count for field: at least min.
func (c *core) count(field string, n, min int32) bool {
	if n < min {
		c.fail(field, "%d: must be at least %d", n, min)
		return false
	}
	return true
}

// finishMeta puts the labels and annotations on meta.
func (c *core) finishMeta(meta *metav1.ObjectMeta) {
	meta.Labels = mergeInto(meta.Labels, c.labels)
	meta.Annotations = mergeInto(meta.Annotations, c.annotations)
}

// finishPod makes the template's one container the builder's: its image,
// requests and command, with the command and restart policy of the kind.
func (c *core) finishPod(t *corev1.PodTemplateSpec, command []string, restart corev1.RestartPolicy) {
	t.Spec.RestartPolicy = restart
	ctr := &t.Spec.Containers[0]
	ctr.Image = c.image
	ctr.Command = command
	ctr.Args = nil
	if len(c.requests) > 0 {
		ctr.Resources.Requests = c.requests.DeepCopy()
	}
}

// finishRun makes each template run the builder's run: the sleep command,
// restart policy Never, and the run annotations.
func (c *core) finishRun(templates ...*corev1.PodTemplateSpec) {
	for _, t := range templates {
		c.finishPod(t, c.run.command(), corev1.RestartPolicyNever)
		for _, k := range []string{topology.AnnotationRunDuration, topology.AnnotationOutcome} {
			if v, ok := c.annotations[k]; ok {
				t.Annotations = mergeInto(t.Annotations, map[string]string{k: v})
			}
		}
	}
}

// serveCommand is the container command of the pods of serving kinds
// (Deployment, StatefulSet, LeaderWorkerSet): run until terminated, exit 0
// on SIGTERM at once.
func serveCommand() []string {
	return []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"}
}

// podTemplate is a template of one container named name, no requests.
func podTemplate(container string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: container}}}}
}

// parseRequests builds a ResourceList from CPU and memory quantities, or an
// error naming the one that does not parse.
func parseRequests(cpu, memory string) (corev1.ResourceList, error) {
	req := corev1.ResourceList{}
	for _, r := range []struct {
		name corev1.ResourceName
		v    string
	}{{corev1.ResourceCPU, cpu}, {corev1.ResourceMemory, memory}} {
		if r.v == "" {
			continue
		}
		q, err := resource.ParseQuantity(r.v)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %v", r.name, r.v, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s %q: must not be negative", r.name, r.v)
		}
		req[r.name] = q
	}
	return req, nil
}

// mergeInto copies src's entries into dst, allocating dst if needed.
func mergeInto(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}
