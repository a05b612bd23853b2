package connect_test

import (
	"fmt"

	"github.com/multikueue-testkit/testkit/connect"
)

// The default connector comes from $MKTK_CONNECTOR (here a function stands
// for the environment), the guard from $MKTK_GUARD (off unless set); a wrong
// value is an error naming the variable.
func ExampleFromEnv() {
	for _, v := range []string{"", "clusterprofile", "ssh"} {
		c, err := connect.FromEnv(func(k string) string {
			if k == connect.EnvConnector {
				return v
			}
			return ""
		})
		if err != nil {
			fmt.Println("error:", err != nil)
			continue
		}
		fmt.Printf("%q → %s\n", v, c.Name())
	}
	// Output:
	// "" → kubeconfig-secret
	// "clusterprofile" → cluster-profile
	// error: true
}
