package capzexample

import (
	"os"
	"testing"

	"github.com/multikueue-testkit/testkit/examples/internal/substrate"
)

// TestMain builds or finds the local topology's binaries (the simulator
// runs on it) before any test's timeout starts.
func TestMain(m *testing.M) { os.Exit(substrate.Main(m)) }
