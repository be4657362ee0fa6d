package engine

import (
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// pacer is the load model's seam (as vegeta's Pacer): it decides when a
// slot sends. next blocks until slot j of worker w may send its next
// request and returns the request's start, its intended send time; ok is
// false when the slot is done: the window ended (or was ended by
// EndWindow), the engine stopped or the count ran out. next is called
// concurrently by every slot's goroutines; a is the calling goroutine's
// own alarm (its timer stopped and drained, and left so). Each pacer reads the worker's
// pure schedule (schedule.go): a rate to integrate in open loop, a
// connection target in closed loop. A connection-rate model is one more
// pacer.
type pacer interface {
	next(w *worker, j int, a *alarm) (start time.Time, ok bool)
}

// newPacer returns the pacer of load model l.
func newPacer(e *Engine, l plan.Load) pacer {
	if l == plan.OpenLoop {
		return openPacer{e}
	}
	return closedPacer{e}
}

// openPacer sends on the schedule: each call takes the worker's next
// ticket and waits for its intended time (the schedule's inverse
// integral) on the worker's clock (clock.go: by default one
// high-resolution timer per worker, whose every wake-up releases all the
// slots due). A ticket still waiting for its time when EndWindow is called
// is given back unsent.
type openPacer struct{ e *Engine }

func (p openPacer) next(w *worker, j int, a *alarm) (start time.Time, ok bool) {
	e := p.e
	k := w.ticket.Add(1) - 1
	off, ok := w.sched.at(float64(k) + w.phase)
	if !ok {
		return time.Time{}, false
	}
	start = e.mono.Add(off)
	if !e.windowEnd.IsZero() && !start.Before(e.windowEnd) {
		return time.Time{}, false
	}
	if !w.take() {
		return time.Time{}, false
	}
	w.taken.Add(1)
	if e.firstOfPhase(w, k, off) {
		// The run's first send and each stage's first: wait at the
		// instant's precision, so agents start and change load
		// together. Other sends wait on the worker's clock.
		if d := time.Until(start) - instantLead; d > 0 && !e.wait(a.timer, d) {
			return e.giveBack(w)
		}
		e.rt.add(waitInstant(start, instantHold))
	} else if !w.clock.wait(start, a) {
		return e.giveBack(w)
	}
	if e.ended.Load() && !start.Before(e.endedAt) {
		return e.giveBack(w) // due at or after the window was ended
	}
	return start, true
}

// closedPacer keeps slot j active while the worker's connection target
// exceeds j, waiting while it does not (a stage ramps it), and starts the
// request now.
type closedPacer struct{ e *Engine }

func (p closedPacer) next(w *worker, j int, a *alarm) (start time.Time, ok bool) {
	e := p.e
	var now time.Time
	for {
		now = time.Now()
		if !e.windowEnd.IsZero() && !now.Before(e.windowEnd) || e.isStopped() || e.ended.Load() {
			return time.Time{}, false
		}
		// The slot is active while the connection target exceeds j. Beyond
		// it, wait for the instant the (linear) target reaches j + 1, so
		// that every agent activates its slots at the same moments; if it
		// never does again, the slot is done.
		off, ok := w.sched.reaches(float64(j+1), now.Sub(e.mono))
		if !ok {
			return time.Time{}, false
		}
		at := e.mono.Add(off)
		if !at.After(now) {
			break
		}
		if d := time.Until(at) - 2*time.Millisecond; d > 0 && !e.wait(a.timer, d) {
			return time.Time{}, false
		}
		if restore := waitInstant(at, 0); restore != nil { // one per slot: no hold
			restore()
		}
	}
	if !w.take() {
		return time.Time{}, false
	}
	// The start is the last clock read of the loop: only the checks
	// above (no wait) come between it and the return.
	return now, true
}
