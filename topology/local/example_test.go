package local_test

import (
	"fmt"

	"github.com/multikueue-testkit/testkit/topology/local"
)

// $MKTK_HA turns HA on for a whole suite without changing its code (here a
// function stands for the environment): local.New uses it when Options.HA
// is the zero value.
func ExampleHAFromEnv() {
	for _, v := range []string{"", "1", "manager", "yes"} {
		ha, err := local.HAFromEnv(func(string) string { return v })
		fmt.Printf("%q: manager %t, workers %t, error %t\n", v, ha.Manager, ha.Workers, err != nil)
	}
	// Output:
	// "": manager false, workers false, error false
	// "1": manager true, workers true, error false
	// "manager": manager true, workers false, error false
	// "yes": manager false, workers false, error true
}
