package metrics

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests (Server
// starts one per Run).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
