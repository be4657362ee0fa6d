package engine

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWaitInstantRestoresThread: waitInstant returns no earlier than the
// instant, with the thread's timer slack as it found it, and still at
// SCHED_FIFO when it may wait there (until its first send); its restore
// returns the thread to its policy (a load thread left real-time would
// starve the target on a shared host), and a second wait on a thread
// still held (an instant before the first one's restore) leaves that to
// the first restore.
func TestWaitInstantRestoresThread(t *testing.T) {
	runtime.LockOSThread() // nested: waitInstant's unlock keeps this thread
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	before, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Skipf("sched_getattr: %v", err)
	}
	slack, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Skipf("PR_GET_TIMERSLACK: %v", err)
	}
	for _, d := range []time.Duration{0, 100 * time.Microsecond, 3 * time.Millisecond} {
		at := time.Now().Add(d)
		restore := waitInstant(at, instantHold)
		if now := time.Now(); now.Before(at) {
			t.Errorf("waitInstant(now+%v) returned %v early", d, at.Sub(now))
		}
		if restore != nil {
			held, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				t.Fatal(err)
			}
			if d > 0 && held.Policy != unix.SCHED_FIFO {
				t.Errorf("waitInstant(now+%v) returned with policy %d, want SCHED_FIFO until its restore", d, held.Policy)
			}
			// A nested wait while held keeps the thread there.
			if r2 := waitInstant(time.Now().Add(100*time.Microsecond), instantHold); r2 != nil {
				r2()
			}
			if again, _ := unix.SchedGetAttr(tid, 0); d > 0 && again.Policy != unix.SCHED_FIFO {
				t.Errorf("a nested wait's restore changed the policy to %d before the first restore", again.Policy)
			}
			restore()
		}
		after, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			t.Fatal(err)
		}
		if after.Policy != before.Policy || after.Priority != before.Priority {
			t.Errorf("after waitInstant(now+%v): policy %d priority %d, want %d %d", d, after.Policy, after.Priority, before.Policy, before.Priority)
		}
		if s, _ := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); s != slack {
			t.Errorf("after waitInstant(now+%v): timer slack %d ns, want %d", d, s, slack)
		}
	}
	// Whether this process may wait at real-time priority (root here):
	// logged, it decides how precise starts are on a crowded host.
	if restore := realtime(); restore != nil {
		restore()
		t.Log("real-time waits: allowed")
	} else {
		t.Log("real-time waits: not allowed (no CAP_SYS_NICE or RLIMIT_RTPRIO)")
	}
}

// TestRTHold: release runs every kept restore once, and a kept restore
// runs by itself after rtKeep when no send releases it.
func TestRTHold(t *testing.T) {
	var h rtHold
	var n [2]atomic.Int32
	h.add(nil) // nothing to keep
	if h.pending.Load() {
		t.Fatal("add(nil) set pending")
	}
	h.add(func() { n[0].Add(1) })
	h.add(func() { n[1].Add(1) })
	h.release()
	h.release()
	if n[0].Load() != 1 || n[1].Load() != 1 {
		t.Errorf("after two releases the restores ran %d and %d times, want 1 each", n[0].Load(), n[1].Load())
	}
	var late atomic.Int32
	h.add(func() { late.Add(1) })
	deadline := time.Now().Add(rtKeep + 10*time.Second) // a loaded machine fires timers late
	for late.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if late.Load() != 1 {
		t.Errorf("a restore no send released ran %d times by rtKeep + 10 s, want 1", late.Load())
	}
	// The earlier adds' fallback timers find nothing left to run.
	time.Sleep(2 * rtKeep)
	if n[0].Load() != 1 || n[1].Load() != 1 || late.Load() != 1 {
		t.Errorf("restores ran again: %d %d %d", n[0].Load(), n[1].Load(), late.Load())
	}
}
