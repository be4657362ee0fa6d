//go:build !linux

package engine

import "time"

// sleepToInstant blocks until t by spinning (see the Linux version).
func sleepToInstant(t time.Time) { spinUntil(t) }
