package cluster

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: each
// goroutine the package starts has an owner that joins it.
//
// memberlist's probe of a member, its indirect probe for another member
// and its suspicion timers may still run out their timeouts after Shutdown
// (each ends on its own; BenchmarkGossipFleet leaves hundreds), so they
// are ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"),
		goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).handleIndirectPing.func2"),
		goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.newSuspicion.func1"))
}
