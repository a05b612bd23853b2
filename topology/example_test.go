package topology_test

import (
	"fmt"

	"github.com/multikueue-testkit/testkit/topology"
)

// Options resolve to a Spec: names, queues and quotas with every default,
// and an error that names the first wrong field.
func ExampleOptions_Resolve() {
	spec, err := topology.Options{Workers: 2}.Resolve()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec.AllClusterNames())
	fmt.Println(spec.Kueue.Namespace, spec.Queues.ClusterQueue, spec.Queues.LocalQueue)

	_, err = topology.Options{Workers: 21}.Resolve()
	fmt.Println(err != nil)
	// Output:
	// [manager worker-1 worker-2]
	// kueue-system cluster-queue user-queue
	// true
}

// A rule that differs by Kueue release asks the facts read from the
// cluster, and says so when the version was not read.
func ExampleKueueFacts_VersionAtLeast() {
	for _, f := range []topology.KueueFacts{{Version: "v0.19.2"}, {Version: "v0.17.1"}, {}} {
		atLeast, known := f.VersionAtLeast("v0.18.0")
		fmt.Printf("%q: at least v0.18.0 %t, known %t\n", f.Version, atLeast, known)
	}
	// Output:
	// "v0.19.2": at least v0.18.0 true, known true
	// "v0.17.1": at least v0.18.0 false, known true
	// "": at least v0.18.0 false, known false
}
