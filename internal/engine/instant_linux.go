package engine

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// sleepToInstant blocks the calling goroutine until t (which must carry a
// monotonic reading) with the kernel's high-resolution timer: an absolute
// clock_nanosleep(2) on CLOCK_MONOTONIC, the clock behind Go's monotonic
// readings, from a locked thread whose timer slack is set to 1 ns
// (prctl(2) PR_SET_TIMERSLACK; the default slack is 50 µs).
//
// Go's own timers wake about a millisecond late on Linux (the runtime's
// netpoller waits in whole milliseconds), and spinning instead takes a core
// per waiting process, which on a host with fewer cores than agents lets the
// scheduler hold one agent back a whole time slice. A sleeping thread costs
// no CPU and is woken within microseconds of t.
//
// Use it for the last few milliseconds only: it cannot be cancelled.
func sleepToInstant(t time.Time) {
	if time.Until(t) <= 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if slack, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); err == nil {
		if unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) == nil {
			defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0)
		}
	}
	var now unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) != nil {
		spinUntil(t)
		return
	}
	// Both clocks are CLOCK_MONOTONIC; the gap between the two readings
	// is tens of nanoseconds.
	deadline := unix.NsecToTimespec(now.Nano() + int64(time.Until(t)))
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &deadline, nil)
		if err != unix.EINTR {
			if err != nil {
				spinUntil(t)
			}
			return
		}
	}
}
