package engine

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newPreciseClock returns the timerfd clock of pacing p (PacingPrecise is
// PacingSlotTimerfd), or nil for PacingGoTimer.
func newPreciseClock(p Pacing, stopped, ended <-chan struct{}, fds *atomic.Int64) sendClock {
	if p == PacingPrecise {
		p = PacingSlotTimerfd
	}
	switch p {
	case PacingSlotTimerfd, PacingSlotTimerfdSpin:
		c := &slotClock{spin: p == PacingSlotTimerfdSpin, stopped: stopped, ended: ended, budget: fds, fallback: &goTimerClock{stopped: stopped, ended: ended}}
		if c.spin {
			// Until wake-ups are seen, the timers are set the most that
			// is spun early: the slots arm their first tickets at the
			// start, up to connections / rate ahead (2.5 s for 500
			// HTTP/2 streams at 200/s), and with no lead they would
			// all wake the timer's delay late.
			c.early.Store(int64(pacingSpin))
		}
		return c
	case PacingPrecise:
		p = PacingTimerfd
	case PacingTimerfd, PacingTimerfdSpin, PacingThread:
	default:
		return nil
	}
	return &timerfdClock{mode: p, stopped: stopped, ended: ended, fallback: &goTimerClock{stopped: stopped, ended: ended}}
}

// timerfdClock is a worker's timerfd(2) on CLOCK_MONOTONIC (the clock of
// Go's monotonic readings), armed for the earliest waiting slot, and the
// goroutine that reads it and releases every slot due (PacingTimerfd,
// PacingTimerfdSpin, PacingThread). A timerfd is not subject to the
// thread's timer slack, unlike clock_nanosleep and epoll timeouts.
type timerfdClock struct {
	mode           Pacing
	stopped, ended <-chan struct{}
	fallback       *goTimerClock // when no timerfd could be made

	fd int // -1: none (fallback)
	wq wakeQueue
	// Guarded by wq.mu.
	armed   bool          // the timer is set for the head's instant
	fireAt  time.Time     // when it is set to expire
	early   time.Duration // PacingTimerfdSpin: how early it is set (the wake-up delay's running mean)
	closing bool
}

func (c *timerfdClock) start() (stop func()) {
	flags := unix.TFD_CLOEXEC
	if c.mode != PacingThread {
		flags |= unix.TFD_NONBLOCK // read through the netpoller
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, flags)
	if err != nil {
		c.fd = -1
		return func() {}
	}
	c.fd = fd
	var read func([]byte) (int, error)
	var f *os.File
	if c.mode == PacingThread {
		read = func(b []byte) (int, error) { return unix.Read(fd, b) }
	} else {
		f = os.NewFile(uintptr(fd), "timerfd") // pollable: the fd is non-blocking
		read = f.Read
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if c.mode == PacingThread {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		c.loop(read)
	}()
	return func() {
		// A blocking read is not woken by a close: fire the timer
		// now, and let the loop see closing.
		c.wq.mu.Lock()
		c.closing = true
		c.arm(time.Now())
		c.wq.mu.Unlock()
		wg.Wait()
		if f != nil {
			f.Close()
		} else {
			unix.Close(fd)
		}
	}
}

// loop reads the timer's expirations and releases the slots due, until
// the clock is stopped.
func (c *timerfdClock) loop(read func([]byte) (int, error)) {
	var buf [8]byte
	for {
		if _, err := read(buf[:]); err != nil && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			return
		}
		c.wq.mu.Lock()
		if c.closing {
			c.wq.mu.Unlock()
			return
		}
		now := time.Now()
		if c.mode == PacingTimerfdSpin {
			if c.armed {
				// The wake-up's delay past the expiry, averaged
				// (1/8 weight), is how early the next is set.
				c.early += (min(max(now.Sub(c.fireAt), 0), pacingSpin) - c.early) / 8
			}
			now = now.Add(c.early) // each slot spins the rest
		}
		c.armed = false
		if next := c.wq.release(now); !next.IsZero() {
			c.arm(next)
		}
		c.wq.mu.Unlock()
	}
}

// arm sets the timer to expire at at (early earlier when spinning), or at
// once when that is past. Called with wq.mu held.
func (c *timerfdClock) arm(at time.Time) {
	at = at.Add(-c.early)
	d := max(time.Until(at), 1) // 0 would disarm it
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	c.armed = unix.TimerfdSettime(c.fd, 0, &its, nil) == nil
	c.fireAt = time.Now().Add(d)
}

func (c *timerfdClock) wait(at time.Time, a *alarm) bool {
	if c.fd < 0 {
		return c.fallback.wait(at, a)
	}
	timer := a.timer
	d := time.Until(at)
	if d <= 0 {
		return true
	}
	c.wq.mu.Lock()
	if d <= c.early {
		c.wq.mu.Unlock()
		spinTo(at)
		return true
	}
	ch, head := c.wq.push(at)
	if head {
		c.arm(at)
	}
	c.wq.mu.Unlock()
	// The slot's Go timer, set for at too, is the backstop: when every
	// processor is busy the runtime looks at the netpoller only between
	// runnable goroutines, but at its timers on every scheduling, so
	// under load the timer may come first. Whichever does wins; a
	// waiter left queued is released unread, its channel never reused.
	timer.Reset(d)
	select {
	case <-ch:
		stopTimer(timer)
		c.wq.mu.Lock()
		c.wq.recycle(ch)
		c.wq.mu.Unlock()
		spinTo(at) // released up to early before at
		return true
	case <-timer.C:
		return true
	case <-c.stopped:
	case <-c.ended:
	}
	stopTimer(timer)
	return false
}

// slotBackstop is how long after its ticket a PacingSlotTimerfd slot's
// read deadline expires when its timerfd's readiness has not been seen:
// with every processor busy the runtime polls the network only between
// runnable goroutines (and its monitor every 10 ms), but runs due timers,
// a read deadline's among them, at every scheduling.
const slotBackstop = 500 * time.Microsecond

// slotClock is PacingSlotTimerfd: each slot goroutine waits on its own
// timerfd (alarm.tfd). The clock keeps the alarms it made so that, when
// the engine stops or the window is ended, it can expire their read
// deadlines and wake their waits; budget bounds how many it makes
// (descriptors the limit leaves beyond the connections).
type slotClock struct {
	spin           bool         // PacingSlotTimerfdSpin
	early          atomic.Int64 // spin: ns the timers are set early (the wake-ups' mean delay; pacingSpin until one is seen)
	stopped, ended <-chan struct{}
	fallback       *goTimerClock
	budget         *atomic.Int64 // timerfds still to be made (the engine's)

	mu     sync.Mutex
	alarms map[*alarm]struct{} // with a timerfd, not closed
	done   bool                // stopped or ended: new alarms start expired
	quit   chan struct{}       // closed by the stop start returned
}

// past is a read deadline already expired.
var past = time.Unix(1, 0)

func (c *slotClock) start() (stop func()) {
	c.quit = make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-c.stopped:
		case <-c.ended:
		case <-c.quit:
			return
		}
		c.mu.Lock()
		c.done = true
		for a := range c.alarms {
			_ = a.tfd.SetReadDeadline(past)
		}
		c.mu.Unlock()
	}()
	return func() {
		close(c.quit)
		wg.Wait()
	}
}

// makeTimerfd gives a its timerfd, or marks it noFd when the budget is
// spent or the kernel refuses one.
func (c *slotClock) makeTimerfd(a *alarm) {
	if c.budget.Add(-1) < 0 {
		a.noFd = true
		return
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		a.noFd = true
		return
	}
	// Pollable: the fd is non-blocking (File.Fd would make it blocking,
	// so the number is kept).
	a.tfd, a.fd = os.NewFile(uintptr(fd), "timerfd"), fd
	if a.raw, err = a.tfd.SyscallConn(); err != nil {
		a.tfd.Close()
		a.tfd, a.noFd = nil, true
		return
	}
	a.clock = c
	a.readFn = a.readTimerfd
	c.mu.Lock()
	if c.alarms == nil {
		c.alarms = map[*alarm]struct{}{}
	}
	c.alarms[a] = struct{}{}
	if c.done {
		_ = a.tfd.SetReadDeadline(past)
	}
	c.mu.Unlock()
}

// closeAlarm unregisters a's timerfd from its clock and closes it.
func closeAlarm(a *alarm) {
	c := a.clock.(*slotClock)
	c.mu.Lock()
	delete(c.alarms, a)
	c.mu.Unlock()
	a.tfd.Close()
	a.tfd = nil
	c.budget.Add(1)
}

func (c *slotClock) wait(at time.Time, a *alarm) bool {
	fire := at
	if c.spin {
		fire = at.Add(-time.Duration(c.early.Load()))
	}
	d := time.Until(fire)
	if d <= 0 {
		if c.spin {
			spinTo(at)
		}
		return true
	}
	if a.tfd == nil && !a.noFd {
		c.makeTimerfd(a)
	}
	if a.tfd == nil {
		return c.fallback.wait(at, a)
	}
	// Set the deadline, then look at the stop signals: the clock expires
	// the deadline after they close, so a close this look misses comes
	// after this deadline and overrides it.
	_ = a.tfd.SetReadDeadline(at.Add(slotBackstop))
	if c.over() {
		return false
	}
	// The read's first call arms the timerfd and waits without reading
	// (a timer armed for later cannot have expired): one system call
	// fewer per send than arming, then a read that finds nothing.
	a.fire, a.arm = fire, true
	err := a.read()
	if err == nil {
		// Cleared, so that it does not fire (and wake a thread) while
		// the slot sends.
		_ = a.tfd.SetReadDeadline(time.Time{})
		if c.spin {
			// The wake-up's delay past the expiry, averaged (1/8
			// weight, racing updates from other slots are harmless),
			// is how early the next is set; the slot spins the rest.
			now := time.Now()
			e := time.Duration(c.early.Load())
			c.early.Store(int64(e + (min(max(now.Sub(fire), 0), pacingSpin)-e)/8))
			spinTo(at)
		}
		return true
	}
	if c.over() {
		return false
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true // the backstop: at is past
	}
	return c.fallback.wait(at, a)
}

// over reports whether the engine stopped or the window was ended.
func (c *slotClock) over() bool {
	select {
	case <-c.stopped:
		return true
	case <-c.ended:
		return true
	default:
		return false
	}
}

// read waits through the netpoller for a's timerfd, armed by readFn's
// first call (made once), to expire.
func (a *alarm) read() error {
	a.errno = 0
	if err := a.raw.Read(a.readFn); err != nil {
		return err
	}
	if a.errno != 0 {
		return a.errno
	}
	return nil
}

// readTimerfd is an alarm's RawConn read function: false to wait. With
// a.arm set, its first call arms the timerfd for a.fire instead of
// reading: RawRead has already reset the descriptor's readiness (its
// prepareRead) before this call, so the expiry's edge, which comes after
// the arming, cannot be lost. Due already: true at once, expired. A
// failed arming: true, with its errno. Later calls, after a wake-up:
// true once a.fire has come. The raw timerfd_settime(2) does not wake the
// runtime's monitor thread, as every entersyscall does after an idle
// spell.
func (a *alarm) readTimerfd(fd uintptr) bool {
	if a.arm {
		a.arm = false
		d := time.Until(a.fire)
		if d <= 0 {
			a.errno = 0
			return true
		}
		its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
		_, _, a.errno = unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&its)), 0, 0, 0)
		return a.errno != 0
	}
	// Woken by readiness: the expiry, without reading it. Epoll reports
	// each expiry of the edge-triggered timerfd whether or not the last
	// one was read (every expiry wakes its wait queue), and the next
	// arming resets the count, so a read(2) of the count would only tell
	// what the clock tells: a readiness from before the arming (an earlier
	// expiry the netpoller had not yet delivered) is told apart by the
	// time, and waited through.
	return !time.Now().Before(a.fire)
}
