package assert_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/multikueue-testkit/testkit/internal/poll"
	"github.com/multikueue-testkit/testkit/internal/testtopo"
	"github.com/multikueue-testkit/testkit/workload"
)

// TestAStuckWorkloadNamesTheRefusedCreate makes every worker's API server
// refuse the creation of the Workload copies of one Job (a
// ValidatingAdmissionPolicy, as a cluster's own policy might): MultiKueue
// cannot dispatch it, so it is never placed. The time-out must say why:
// each worker refused MultiKueue's create, and by which policy; and since
// the refused writes touched no foreign object, ForeignUntouched passes.
func TestAStuckWorkloadNamesTheRefusedCreate(t *testing.T) {
	ctx := context.Background()
	const name, policy, msg = "stuck", "testkit-deny-stuck", "the test refuses this Workload's copies"
	for _, w := range env.Topo.Workers {
		lift := denyWrites(t, ctx, w, policy, []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			admissionregistrationv1.Rule{APIGroups: []string{kueue.SchemeGroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"workloads"}},
			fmt.Sprintf("object.metadata.name.startsWith(%q)", "job-"+name+"-"), "false", msg)
		t.Cleanup(lift)
		// Enforced once the API server's informer has it: a dry-run create.
		probe := &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "job-" + name + "-probe", Namespace: "default"},
			Spec: kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
			}}}},
		}
		err := poll.Until(ctx, 30*time.Second, fmt.Sprintf("cluster %q: policy %s to refuse creating Workload %s", w.Name, policy, probe.Name), func(ctx context.Context) error {
			err := w.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			if err != nil && strings.Contains(err.Error(), msg) {
				return nil
			}
			return fmt.Errorf("not enforced yet (create: %v)", err)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	c := checker(20 * time.Second)
	c.Since = time.Now()
	job := workload.NewJob(name, "default").Queue("user-queue").Requests("1", "1Gi").RunFor(time.Second).Obj()
	submit(t, ctx, job)
	t.Cleanup(func() { remove(t, ctx, job) })
	wl := testtopo.WaitWorkload(ctx, t, env.Topo.Manager, job).Name
	want := []string{"ExactlyOnceAdmitted failed", "has no status.clusterName yet"}
	for _, w := range env.Topo.Workers {
		want = append(want, fmt.Sprintf(`what holds it: cluster %q refused`, w.Name))
	}
	want = append(want, "create workloads.kueue.x-k8s.io default/"+wl+" by "+serviceAccountUser(),
		"refused by ValidatingAdmissionPolicy "+policy, msg)
	testtopo.FailsNaming(t, c.ExactlyOnceAdmitted(ctx, job), want...)
	if err := c.ForeignUntouched(ctx); err != nil {
		t.Errorf("no foreign object was touched: %v", err)
	}
}
