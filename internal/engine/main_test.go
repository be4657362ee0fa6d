package engine

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// goroutine the engine starts (slot loops, HTTP/2 stream slots, session
// readers and flushers, connection growth) has an owner that joins it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
