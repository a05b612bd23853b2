package scenario_test

import (
	"context"
	"testing"

	"github.com/multikueue-testkit/testkit/scenario"
)

// TestSetup: the setup-activation scenario on 1 manager + 3 workers.
func TestSetup(t *testing.T) {
	env := mixed.get(t)
	scenario.Require(t, env).Setup(context.Background())
}
