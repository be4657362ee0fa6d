package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: each
// goroutine the package starts has an owner that joins it.
//
// memberlist's probe of a member may still sleep out its timeout after
// Shutdown (it ends on its own), so it is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
