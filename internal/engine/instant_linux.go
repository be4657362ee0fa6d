package engine

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// waitInstant blocks the calling goroutine until t (which must carry a
// monotonic reading), for the run's start and each stage's: the moment
// every agent must act on together. Call it for the last few milliseconds
// only: it cannot be cancelled.
//
// Go's timers wake about a millisecond late on Linux (the runtime's
// netpoller waits in whole milliseconds), so the goroutine locks its thread
// and sleeps with the kernel's high-resolution timer: an absolute
// clock_nanosleep(2) on CLOCK_MONOTONIC, the clock behind Go's monotonic
// readings, with the thread's timer slack at 1 ns (prctl(2)
// PR_SET_TIMERSLACK; the default is 50 µs), to instantSpin before t, then
// spins to t.
//
// Where the process may (CAP_SYS_NICE, or an RLIMIT_RTPRIO above 0), the
// thread waits at real-time priority (SCHED_FIFO 1, sched(7)) and returns
// to its policy at t, before anything is sent. A host with fewer free cores
// than waiting agents then still wakes each of them on time: a woken
// real-time thread preempts ordinary ones at once, instead of queueing
// behind the target or other agents' traffic for a time slice. Without the
// privilege it waits at its normal priority.
func waitInstant(t time.Time) {
	if time.Until(t) <= 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	spin := instantSpin
	if restore := realtime(); restore != nil {
		defer restore()
		spin = 0 // it preempts ordinary threads on waking: no CPU to hold
	}
	if slack, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); err == nil {
		if unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) == nil {
			defer func() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0) }()
		}
	}
	if d := time.Until(t) - spin; d > 0 {
		var now unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) == nil {
			// Both clocks are CLOCK_MONOTONIC; the two readings are
			// tens of nanoseconds apart.
			deadline := unix.NsecToTimespec(now.Nano() + int64(d))
			for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &deadline, nil) == unix.EINTR {
			}
		}
	}
	// The thread is locked: a plain spin (no Gosched, which would park
	// the thread until the goroutine is rescheduled).
	for time.Now().Before(t) {
	}
}

// realtime moves the calling (locked) thread to SCHED_FIFO priority 1 and
// returns the function that restores its previous policy, or nil when the
// process may not.
func realtime() (restore func()) {
	tid := unix.Gettid()
	prev, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return nil
	}
	if unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0) != nil {
		return nil
	}
	return func() { _ = unix.SchedSetAttr(tid, prev, 0) }
}

// RealtimeWaits reports whether this process may wait for start and stage
// instants at real-time priority (see waitInstant): without it, agents that
// share cores with other busy processes start up to a time slice apart.
func RealtimeWaits() bool {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if restore := realtime(); restore != nil {
		restore()
		return true
	}
	return false
}
