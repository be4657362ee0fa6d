//go:build !linux

package engine

// newPreciseClock returns nil: precise clocks need Linux's timerfd(2), so
// every pacing is PacingGoTimer elsewhere.
func newPreciseClock(Pacing, <-chan struct{}, <-chan struct{}) sendClock { return nil }
