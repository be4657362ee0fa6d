package coordinator_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them (the
// run's Ready receivers, receive pumps and stop watcher are joined by the
// run). memberlist's probe goroutine ends on its own timer after Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
