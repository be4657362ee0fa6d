package engine

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// sendClock is an open-loop worker's wake-up source: its slots wait on it
// for their tickets' intended send times. wait blocks until at (monotonic)
// and reports true, or returns false as soon as the engine stops or the
// window is ended (EndWindow). a is the calling slot goroutine's own
// alarm (its Go timer stopped and drained, and left so). wait is called
// concurrently by every slot of the worker; start is called once by Run
// before any slot waits and returns the function that stops the clock
// once no slot waits any more (it joins what start began).
type sendClock interface {
	start() (stop func())
	wait(at time.Time, a *alarm) bool
}

// alarm is what one slot goroutine waits with: its Go timer and, for
// PacingSlotTimerfd, its own timerfd(2), made on its first wait and
// closed by close. Owned by that goroutine (the clock that made the
// timerfd may only expire its read deadline).
type alarm struct {
	timer *time.Timer
	tfd   *os.File // the timerfd, pollable; nil until made
	fd    int      // tfd's descriptor
	raw   syscall.RawConn
	// The timerfd's wait (clock_linux.go): its RawConn read function,
	// made once, and the arming's result.
	readFn func(fd uintptr) bool
	errno  syscall.Errno
	// fire, when arm is set, is the expiry readFn's first call arms
	// before the first wait (clock_linux.go).
	fire  time.Time
	arm   bool
	clock sendClock // the clock tfd is registered with
	noFd  bool      // no timerfd could be had: wait on timer
}

// newAlarm returns an alarm with a stopped timer and no timerfd.
func newAlarm() *alarm {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &alarm{timer: t}
}

// close closes the alarm's timerfd, if any. Called by its goroutine once
// it waits no more.
func (a *alarm) close() {
	if a.tfd != nil {
		closeAlarm(a)
	}
}

// Pacing names a sendClock implementation (Config.Pacing).
type Pacing uint8

const (
	// PacingPrecise is the default: PacingSlotTimerfd where the platform
	// has it (Linux), else PacingGoTimer. Chosen by measurement
	// (BenchmarkOpenLoopLateness, BenchmarkOpenLoopCost; bench/README.md,
	// "Measured design choices").
	PacingPrecise Pacing = iota
	// PacingGoTimer waits on each slot's own Go timer: the runtime's
	// netpoller sleeps in whole milliseconds when its processors are
	// idle, so sends leave up to 1 ms (about 0.5 ms on average) late.
	PacingGoTimer
	// PacingTimerfd keeps one queue of waiting slots per worker, ordered
	// by intended time, and one timerfd(2) armed for its head, read
	// through the netpoller: the kernel's high-resolution timer makes the
	// descriptor readable at the instant, which wakes epoll at once
	// whatever its millisecond timeout, and one wake-up releases every
	// slot whose time has come (Linux). Each slot's Go timer, set for the
	// same instant, is the backstop when every processor is busy.
	PacingTimerfd
	// PacingTimerfdSpin is PacingTimerfd set to expire early by the
	// running mean of its wake-ups' delays past expiry (at most
	// pacingSpin), each released slot then spinning (yielding) to its
	// instant: the spin hides the wake-up's own latency at the cost of
	// about that much CPU per send (Linux).
	PacingTimerfdSpin
	// PacingThread reads the worker's timerfd with a blocking read(2) on
	// a locked OS thread, as clock_nanosleep(2) on a locked thread would
	// sleep but re-armable when an earlier ticket arrives: no netpoller
	// on the wake-up path (Linux).
	PacingThread
	// PacingSlotTimerfd gives each slot goroutine its own timerfd(2),
	// armed for its ticket and read through the netpoller by the slot
	// itself: the thread that epoll wakes runs the slot at once, with no
	// hand-off from a clock goroutine (which wakes a second thread) and
	// no Go timer firing for the same instant; timers due together are
	// returned by one epoll_wait. A read deadline slotBackstop after the
	// ticket is the backstop when every processor is busy (Linux). One
	// descriptor per slot goroutine, within what the descriptor limit
	// leaves beyond the connections (spareFds); a slot beyond it waits on
	// its Go timer.
	PacingSlotTimerfd
	// PacingSlotTimerfdSpin is PacingSlotTimerfd set to expire early by
	// the running mean of the worker's wake-up delays past expiry (at
	// most pacingSpin), the slot then yielding until its instant, as
	// PacingTimerfdSpin (Linux).
	PacingSlotTimerfdSpin
)

// slotFds reports whether pacing p gives each slot goroutine its own
// timerfd where the platform has one.
func (p Pacing) slotFds() bool {
	return p == PacingPrecise || p == PacingSlotTimerfd || p == PacingSlotTimerfdSpin
}

// pacingSpin bounds how early the spinning pacings (PacingTimerfdSpin,
// PacingSlotTimerfdSpin) wake before an intended time, and so the CPU
// they spin per send: the plan's bound (plan.SpinLead).
const pacingSpin = plan.SpinLead

// String returns the pacing's name (as in the benchmarks).
func (p Pacing) String() string {
	switch p {
	case PacingPrecise:
		return "precise"
	case PacingGoTimer:
		return "gotimer"
	case PacingTimerfd:
		return "timerfd"
	case PacingTimerfdSpin:
		return "timerfd-spin"
	case PacingThread:
		return "thread"
	case PacingSlotTimerfd:
		return "slot-timerfd"
	case PacingSlotTimerfdSpin:
		return "slot-timerfd-spin"
	}
	return "unknown"
}

// newSendClock returns worker clocks of pacing p for an engine that stops
// (or whose window ends) when done or ended is closed; fds bounds the
// timerfds PacingSlotTimerfd clocks make (shared by the engine's).
func newSendClock(p Pacing, stopped, ended <-chan struct{}, fds *atomic.Int64) sendClock {
	if c := newPreciseClock(p, stopped, ended, fds); c != nil {
		return c
	}
	return &goTimerClock{stopped: stopped, ended: ended}
}

// goTimerClock waits on the slot's Go timer (PacingGoTimer).
type goTimerClock struct{ stopped, ended <-chan struct{} }

func (c *goTimerClock) start() func() { return func() {} }

func (c *goTimerClock) wait(at time.Time, a *alarm) bool {
	d := time.Until(at)
	if d <= 0 {
		return true
	}
	return waitTimer(a.timer, d, c.stopped, c.ended)
}

// waitTimer sleeps d on timer, or until stopped or ended is closed
// (false).
func waitTimer(timer *time.Timer, d time.Duration, stopped, ended <-chan struct{}) bool {
	timer.Reset(d)
	select {
	case <-timer.C:
		return true
	case <-stopped:
	case <-ended:
	}
	stopTimer(timer)
	return false
}

// stopTimer stops timer and drains its channel: it is left stopped and
// empty, ready for Reset.
func stopTimer(timer *time.Timer) {
	if !timer.Stop() {
		select {
		case <-timer.C:
		default:
		}
	}
}

// waiter is one slot waiting on a wakeQueue: released by a send on ch
// (capacity 1) at or after at.
type waiter struct {
	at time.Time
	ch chan struct{}
}

// wakeQueue is a worker's waiting slots in intended-time order, for the
// clocks that wake once for every slot due (precise clocks). Tickets are
// taken in order, so a new waiter almost always goes last: insertion
// scans from the tail. q[h:] are waiting. Guarded by mu.
type wakeQueue struct {
	mu   sync.Mutex
	q    []waiter
	h    int
	free []chan struct{} // channels of released waiters, reused
}

// push queues a waiter for at and returns its channel and whether it is
// now the head (the clock must be re-armed for it). Called with mu held.
func (w *wakeQueue) push(at time.Time) (ch chan struct{}, head bool) {
	if n := len(w.free); n > 0 {
		ch, w.free = w.free[n-1], w.free[:n-1]
	} else {
		ch = make(chan struct{}, 1)
	}
	if w.h > 0 && w.h >= len(w.q)/2 { // compact: the released half goes
		n := copy(w.q, w.q[w.h:])
		clear(w.q[n:])
		w.q, w.h = w.q[:n], 0
	}
	w.q = append(w.q, waiter{})
	i := len(w.q) - 1
	for ; i > w.h && w.q[i-1].at.After(at); i-- {
		w.q[i] = w.q[i-1]
	}
	w.q[i] = waiter{at: at, ch: ch}
	return ch, i == w.h
}

// release wakes every waiter due by now and returns the next head's
// instant (zero when none waits). Called with mu held.
func (w *wakeQueue) release(now time.Time) time.Time {
	for w.h < len(w.q) && !w.q[w.h].at.After(now) {
		w.q[w.h].ch <- struct{}{}
		w.q[w.h] = waiter{}
		w.h++
	}
	if w.h == len(w.q) {
		w.q, w.h = w.q[:0], 0
		return time.Time{}
	}
	return w.q[w.h].at
}

// recycle returns a released waiter's channel for reuse (it was drained
// by its waiter). Called with mu held.
func (w *wakeQueue) recycle(ch chan struct{}) { w.free = append(w.free, ch) }

// spinTo yields until t: the last microseconds of a PacingTimerfdSpin
// wait.
func spinTo(t time.Time) {
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}
