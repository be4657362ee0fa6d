package nginxtest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: each
// goroutine the package starts has an owner that joins it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
