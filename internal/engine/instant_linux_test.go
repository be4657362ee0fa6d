package engine

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWaitInstantRestoresThread: waitInstant returns no earlier than the
// instant and leaves its thread as it found it: the scheduling policy
// (it may raise the thread to SCHED_FIFO while waiting; a load thread left
// real-time would starve the target on a shared host) and the timer slack.
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
		waitInstant(at)
		if now := time.Now(); now.Before(at) {
			t.Errorf("waitInstant(now+%v) returned %v early", d, at.Sub(now))
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
