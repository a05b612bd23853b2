package assert_test

import (
	"errors"
	"fmt"

	"github.com/multikueue-testkit/testkit/assert"
)

// Every assertion fails with an *assert.Failure: what was expected, what
// was found (naming the cluster and object), then the per-cluster timeline.
// Its fields let a test tell one cause from another.
func ExampleFailure() {
	var err error = &assert.Failure{
		Assertion: "ExactlyOnceAdmitted",
		Object:    "Workload default/job-a-1b2c3",
		Expected:  "in each admission cycle exactly one worker admits the workload",
		Problems:  []string{`cluster "worker-2": remote Job default/a created at +1.2s while the workload was placed on "worker-1"`},
	}
	fmt.Print(err)
	var f *assert.Failure
	fmt.Println(errors.As(err, &f), f.Assertion)
	// Output:
	// ExactlyOnceAdmitted failed for Workload default/job-a-1b2c3
	//   expected: in each admission cycle exactly one worker admits the workload
	//   found:
	//     - cluster "worker-2": remote Job default/a created at +1.2s while the workload was placed on "worker-1"
	// true ExactlyOnceAdmitted
}
