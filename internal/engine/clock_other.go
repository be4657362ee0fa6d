//go:build !linux

package engine

import "sync/atomic"

// newPreciseClock returns nil: precise clocks need Linux's timerfd(2), so
// every pacing is PacingGoTimer elsewhere.
func newPreciseClock(Pacing, <-chan struct{}, <-chan struct{}, *atomic.Int64) sendClock { return nil }

// closeAlarm is never called: no alarm has a timerfd here.
func closeAlarm(*alarm) {}
