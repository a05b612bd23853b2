package install_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/multikueue-testkit/testkit/topology"
	"github.com/multikueue-testkit/testkit/topology/install"
)

// RenderKueue renders, offline, what Kueue() would install for a Spec: the
// chart of the chosen release (here v0.19.2's, from its module source) with
// the topology's Kueue configuration; the image defaults to that release's.
func ExampleRenderKueue() {
	spec, err := topology.Options{Workers: 2}.Resolve()
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := install.RenderKueue(context.Background(), install.KueueOptions{Spec: spec, Version: "v0.19.2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Chart, *r.Config.Namespace, r.Config.Integrations.Frameworks)
	for _, o := range r.Objects {
		if o.GetKind() == "Deployment" {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			fmt.Println(o.GetName(), cs[0].(map[string]any)["image"])
		}
	}
	// Output:
	// kueue-0.19.2 kueue-system [batch/job]
	// kueue-controller-manager registry.k8s.io/kueue/kueue:v0.19.2
}
