package engine

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWakeQueueOrder: waiters pushed out of order are released in
// intended-time order, all those due in one release, and the queue names
// the next head's instant.
func TestWakeQueueOrder(t *testing.T) {
	base := time.Now()
	var q wakeQueue
	chans := map[int]chan struct{}{}
	for _, c := range []struct {
		at   int // ms after base
		head bool
	}{{5, true}, {7, false}, {3, true}, {9, false}, {1, true}, {6, false}} {
		ch, head := q.push(base.Add(time.Duration(c.at) * time.Millisecond))
		if head != c.head {
			t.Errorf("push(+%d ms): head %v, want %v", c.at, head, c.head)
		}
		chans[c.at] = ch
	}
	released := func(ats ...int) {
		t.Helper()
		for _, at := range ats {
			select {
			case <-chans[at]:
				q.recycle(chans[at])
			default:
				t.Errorf("waiter +%d ms not released", at)
			}
		}
		for at, ch := range chans {
			if len(ch) > 0 {
				t.Errorf("waiter +%d ms released early", at)
			}
		}
	}
	if next := q.release(base.Add(5 * time.Millisecond)); !next.Equal(base.Add(6 * time.Millisecond)) {
		t.Errorf("release(+5 ms): next head at %v, want +6 ms", next.Sub(base))
	}
	released(1, 3, 5)
	if ch, head := q.push(base.Add(2 * time.Millisecond)); !head || ch == nil {
		t.Error("a waiter earlier than every queued one is not the head")
	} else {
		chans[2] = ch
	}
	if next := q.release(base.Add(time.Hour)); !next.IsZero() {
		t.Errorf("release(all): next head at %v, want none", next.Sub(base))
	}
	released(2, 6, 7, 9)
	// The +2 ms waiter reused a released waiter's channel: 6 in all.
	if len(q.free) != 6 {
		t.Errorf("%d channels kept for reuse, want 6", len(q.free))
	}
}

// TestSendClocksNeverEarly: with every pacing, waits for instants spread
// over 30 ms all return true, none before its instant, and waits for an
// instant an hour away return false once the window is ended; the clock
// then stops (goleak checks its goroutine is joined).
func TestSendClocksNeverEarly(t *testing.T) {
	for _, p := range []Pacing{PacingPrecise, PacingGoTimer, PacingTimerfd, PacingTimerfdSpin, PacingThread, PacingSlotTimerfd, PacingSlotTimerfdSpin} {
		t.Run(p.String(), func(t *testing.T) {
			stopped, ended := make(chan struct{}), make(chan struct{})
			var fds atomic.Int64
			fds.Store(30) // half the waits' alarms: the rest wait on Go timers
			c := newSendClock(p, stopped, ended, &fds)
			stop := c.start()
			defer stop()
			base := time.Now()
			var near, farWG sync.WaitGroup
			for i := range 60 {
				at := base.Add(time.Duration(i*i%61) * 500 * time.Microsecond)
				far := i%10 == 0
				if far {
					at = base.Add(time.Hour)
				}
				wg := &near
				if far {
					wg = &farWG
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					a := newAlarm()
					defer a.close()
					ok := c.wait(at, a)
					switch now := time.Now(); {
					case far && ok:
						t.Errorf("wait for an hour returned true after %v", now.Sub(base))
					case !far && !ok:
						t.Errorf("wait for +%v returned false", at.Sub(base))
					case !far && now.Before(at):
						t.Errorf("wait for +%v returned %v early", at.Sub(base), at.Sub(now))
					}
				}()
			}
			// The near waits end by themselves; the far ones only when
			// the window is ended.
			near.Wait()
			close(ended)
			farWG.Wait()
		})
	}
}
