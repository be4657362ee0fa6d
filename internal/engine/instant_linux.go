package engine

import (
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// waitInstant blocks the calling goroutine until t (which must carry a
// monotonic reading), for the run's start and each stage's: the moment
// every agent must act on together. Call it for the last instantLead only
// (a Go timer before it): it cannot be cancelled.
//
// Go's timers wake about a millisecond late on Linux (the runtime's
// netpoller waits in whole milliseconds), and several milliseconds late on
// a loaded host (the woken thread waits for a CPU at its normal priority),
// so the goroutine locks its thread and sleeps with the kernel's
// high-resolution timer: an absolute clock_nanosleep(2) on
// CLOCK_MONOTONIC, the clock behind Go's monotonic readings, with the
// thread's timer slack at 1 ns (prctl(2) PR_SET_TIMERSLACK; the default is
// 50 µs), to instantSpin before t, then spins to t.
//
// The last hold of the sleep (at most; 0 for none) is a raw system call,
// which keeps the goroutine's processor (P): a thread leaving an ordinary
// blocking call must get a processor back, which, when the runtime has
// handed it to another thread meanwhile, takes that thread's wake-up at
// its normal priority (tens of microseconds, milliseconds on a loaded
// host). Nothing else of the process runs on that processor during the
// hold, so it is for instants once per run or stage, not per connection.
//
// Where the process may (CAP_SYS_NICE, or an RLIMIT_RTPRIO above 0), the
// thread waits at real-time priority (SCHED_FIFO 1, sched(7)). A host with
// fewer free cores than waiting agents then still wakes each of them on
// time: a woken real-time thread preempts ordinary ones at once, instead
// of queueing behind the target or other agents' traffic for a time
// slice. Without the privilege it waits at its normal priority, and
// waitInstant returns nil.
//
// With the privilege, waitInstant returns with the thread still at
// real-time priority (and no longer locked to the goroutine, which goes
// on running on it), and the function that returns the thread to its
// policy: the caller calls it once its first send is done (rtHold). Going
// back to the ordinary policy at t instead let the kernel preempt the
// thread at once on a busy CPU, for one or more time slices: on a host at
// load average 17 for 2 CPUs, the first send left 1-21 ms after the
// instant in one run in three (bench/skew.sh).
func waitInstant(t time.Time, hold time.Duration) (restore func()) {
	if time.Until(t) <= 0 {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// With a hold, spin at real-time priority too: a real-time thread
	// gets its CPU at once on waking, but wakes late by the kernel's timer
	// latency, 30-75 µs in the 2-vCPU VM of bench/skew.sh, and more when
	// the hypervisor runs something else on the vCPU (188 µs once in 20).
	// Without one (a slot's activation on a ramp, many per second) a
	// real-time thread does not spin.
	spin := instantSpin
	if restore = realtime(); restore != nil && hold == 0 {
		spin = 0
	}
	if slack, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); err == nil {
		if unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) == nil {
			defer func() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0) }()
		}
	}
	hold = max(hold, spin)
	if d := time.Until(t) - hold; d > 0 {
		sleepMono(d, false)
	}
	if d := time.Until(t) - spin; d > 0 {
		sleepMono(d, true)
	}
	// The thread is locked: a plain spin (no Gosched, which would park
	// the thread until the goroutine is rescheduled).
	for time.Now().Before(t) {
	}
	return restore
}

// sleepMono sleeps d with an absolute clock_nanosleep(2) on
// CLOCK_MONOTONIC (both clocks are CLOCK_MONOTONIC; the two readings are
// tens of nanoseconds apart); raw: without telling the runtime, so that
// the goroutine keeps its processor.
func sleepMono(d time.Duration, raw bool) {
	var now unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) != nil {
		return
	}
	deadline := unix.NsecToTimespec(now.Nano() + int64(d))
	if !raw {
		for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &deadline, nil) == unix.EINTR {
		}
		return
	}
	for {
		_, _, e := unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME,
			uintptr(unsafe.Pointer(&deadline)), 0, 0, 0)
		if e != unix.EINTR {
			return
		}
	}
}

// realtime moves the calling (locked) thread to SCHED_FIFO priority 1 and
// returns the function that restores its previous policy (from any
// thread), or nil when the process may not. A thread already there (an
// earlier instant's hold, not yet restored) is left as it is, with a
// restore that does nothing: the earlier one's returns it.
func realtime() (restore func()) {
	tid := unix.Gettid()
	prev, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return nil
	}
	if prev.Policy == unix.SCHED_FIFO && prev.Priority == 1 {
		return func() {}
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
