//go:build !linux

package engine

import (
	"runtime"
	"time"
)

// waitInstant blocks until t by spinning (see the Linux version).
func waitInstant(t time.Time, _ time.Duration) (restore func()) {
	spinUntil(t)
	return nil
}

// spinUntil polls the clock until t, letting other goroutines run between
// polls: precise to microseconds.
func spinUntil(t time.Time) {
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}

// RealtimeWaits reports false: real-time waits are Linux only.
func RealtimeWaits() bool { return false }
