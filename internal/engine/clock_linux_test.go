package engine

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestSlotTimerfdWaits: one slot's alarm waiting again and again (as a
// paced slot does, the instants a few hundred microseconds apart, some
// already past) never returns before its instant and never false; and a
// wake-up before the instant (its timerfd expiring early, as an earlier
// arming's expiry delivered late would) does not end the wait: it returns
// at the instant or after, by the backstop at the latest, never at the
// early expiry. The same holds when the timerfd is set early and the slot
// spins to the instant (PacingSlotTimerfdSpin, --pacing-spin).
func TestSlotTimerfdWaits(t *testing.T) {
	for _, pacing := range []Pacing{PacingSlotTimerfd, PacingSlotTimerfdSpin} {
		t.Run(pacing.String(), func(t *testing.T) {
			stopped, ended := make(chan struct{}), make(chan struct{})
			var fds atomic.Int64
			fds.Store(1)
			c := newSendClock(pacing, stopped, ended, &fds)
			stop := c.start()
			defer stop()
			a := newAlarm()
			defer a.close()

			at := time.Now()
			for i := range 300 {
				at = at.Add(time.Duration(i%7) * 60 * time.Microsecond) // 0-360 us apart
				if !c.wait(at, a) {
					t.Fatalf("wait %d returned false", i)
				}
				if now := time.Now(); now.Before(at) {
					t.Fatalf("wait %d returned %v early", i, at.Sub(now))
				}
			}
			if a.tfd == nil {
				t.Fatal("the alarm has no timerfd: the test did not wait on one")
			}

			// An early expiry during a wait: 5 ms into a 40 ms wait, the timerfd
			// is armed to expire 1 us later (which also drops the wait's own
			// arming: the backstop ends the wait then).
			fd := a.fd
			at = time.Now().Add(40 * time.Millisecond)
			go func() {
				time.Sleep(5 * time.Millisecond)
				its := unix.ItimerSpec{Value: unix.Timespec{Nsec: 1000}}
				_, _, _ = unix.Syscall6(unix.SYS_TIMERFD_SETTIME, uintptr(fd), 0, uintptr(unsafe.Pointer(&its)), 0, 0, 0)
			}()
			if !c.wait(at, a) {
				t.Fatal("the wait with an early expiry returned false")
			}
			if now := time.Now(); now.Before(at) {
				t.Fatalf("an expiry %v before the instant ended the wait %v early", 35*time.Millisecond, at.Sub(now))
			}
		})
	}
}
