package engine

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// newPreciseClock returns the timerfd clock of pacing p (PacingPrecise is
// PacingTimerfd), or nil for PacingGoTimer.
func newPreciseClock(p Pacing, stopped, ended <-chan struct{}) sendClock {
	switch p {
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

func (c *timerfdClock) wait(at time.Time, timer *time.Timer) bool {
	if c.fd < 0 {
		return c.fallback.wait(at, timer)
	}
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
