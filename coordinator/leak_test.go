package coordinator_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/phalanxload/phalanx/coordinator"
)

// TestMain fails the package's tests if any goroutine outlives them (the
// run's Ready receivers, receive pumps and stop watcher are joined by the
// run). memberlist's probe goroutine ends on its own timer after Shutdown.
// Started as a stub process of BenchmarkCoordinatorAgents, the test
// binary serves simulated agents instead.
func TestMain(m *testing.M) {
	if coordinator.ServeStubAgentsFromEnv() {
		return
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
