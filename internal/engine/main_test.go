package engine

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// goroutine the engine starts (slot loops, HTTP/2 stream slots, session
// readers and flushers, connection growth) has an owner that joins it.
// Started with rawServerEnv set, the test binary is instead the raw
// keep-alive server of BenchmarkOpenLoopCost (serveRawProcess), so that
// the benchmark's process CPU is the client's alone; with rawTLSServerEnv,
// the same over TLS for BenchmarkConnectionMemory (serveRawTLSProcess).
func TestMain(m *testing.M) {
	if os.Getenv(rawServerEnv) != "" {
		serveRawProcess()
		return
	}
	if os.Getenv(rawTLSServerEnv) != "" {
		serveRawTLSProcess()
		return
	}
	goleak.VerifyTestMain(m)
}
