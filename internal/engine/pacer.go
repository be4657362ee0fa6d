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

// pollPacer is a pacer that can also answer without waiting: poll is next
// for slot j of worker w, except that when the slot may not send before
// at (non-zero), it returns at and takes nothing from the budget. It never
// blocks.
type pollPacer interface {
	poll(w *worker, j int) (start time.Time, ok bool, at time.Time)
}

var _ pollPacer = closedPacer{}

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
	tk, ok := p.take(w)
	if !ok {
		return time.Time{}, false
	}
	return p.await(w, tk, a)
}

// ticket is a send the worker's schedule gave a slot (openPacer.take):
// its intended time, and whether it is the first of the run or of a
// stage (waited for at the instant's precision).
type ticket struct {
	start time.Time
	first bool
}

// take takes worker w's next ticket from the budget without waiting for
// it; ok is false when the slot is done (the window's end, the count, the
// engine's end). A ticket taken is then waited for by await, on the
// slot's goroutine or, for a chained HTTP/2 slot, by its session's pacer
// (h2pacer.go). It never blocks.
func (p openPacer) take(w *worker) (tk ticket, ok bool) {
	e := p.e
	k := w.ticket.Add(1) - 1
	raw, ok := w.sched.at(float64(k) + w.phase)
	if !ok {
		return ticket{}, false
	}
	start := e.mono.Add(e.paced(raw))
	if !e.windowEnd.IsZero() && !start.Before(e.windowEnd) {
		return ticket{}, false
	}
	if !w.take() {
		return ticket{}, false
	}
	w.taken.Add(1)
	return ticket{start: start, first: e.firstOfPhase(w, k, raw)}, true
}

// await waits for ticket tk's intended time and returns it, or gives the
// ticket back (ok false) when the engine stops or the window is ended
// first, or it is due at or after the window was ended.
func (p openPacer) await(w *worker, tk ticket, a *alarm) (start time.Time, ok bool) {
	e := p.e
	start = tk.start
	if tk.first {
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
	if e.endedBy(start) {
		return e.giveBack(w) // due at or after the window was ended
	}
	return start, true
}

// endedBy reports whether the window was ended (EndWindow) at or before
// t: a ticket due at t is then not sent.
func (e *Engine) endedBy(t time.Time) bool {
	return e.ended.Load() && !t.Before(e.endedAt)
}

// paced returns the intended send offset (from the start instant) of a
// ticket the schedule puts at raw: raw itself, or, with the plan's
// PacingWindow, raw rounded down to a multiple of the window, so that
// every ticket of one window has the same intended time and its slots
// are released by one wake-up of the clock.
func (e *Engine) paced(raw time.Duration) time.Duration {
	if w := e.plan.PacingWindow; w > 0 {
		return raw - raw%w
	}
	return raw
}

// rawCutoff returns the schedule offset c such that a ticket's paced
// offset is before t exactly when the schedule's is before c: t itself
// without a pacing window; with one, t rounded up to a multiple of it
// (floor(r/W)·W < t ⟺ r < ⌈t/W⌉·W). The accounting of tickets due by an
// instant (growth refused, unsent at the window's end) uses it, so that it
// counts what the pacer releases.
func (e *Engine) rawCutoff(t time.Duration) time.Duration {
	if w := e.plan.PacingWindow; w > 0 && t%w != 0 {
		return t - t%w + w
	}
	return t
}

// closedPacer keeps slot j active while the worker's connection target
// exceeds j, waiting while it does not (a stage ramps it), and starts the
// request now.
type closedPacer struct{ e *Engine }

func (p closedPacer) next(w *worker, j int, a *alarm) (start time.Time, ok bool) {
	e := p.e
	var activated time.Time // the instant the slot waited for, if it did
	for {
		start, ok, at := p.poll(w, j)
		if at.IsZero() {
			if ok && !activated.IsZero() {
				// A stage's change, as open loop's first send of a stage:
				// the lateness of the first activation in it.
				e.noteStage(activated, start)
			}
			return start, ok
		}
		activated = at
		// The slot is inactive until at, the instant the (linear) target
		// reaches j + 1, so that every agent activates its slots at the
		// same moments.
		if e.firstActivation(w, j, at.Sub(e.mono)) {
			// A stage's change: its first activation waits as open loop's
			// first send of a stage does, at the instant's precision (a
			// hold while the other connections run; the real-time
			// priority is released at the slot's send, noteSend).
			if d := time.Until(at) - instantLead; d > 0 && !e.wait(a.timer, d) {
				return time.Time{}, false
			}
			e.rt.add(waitInstant(at, instantHold))
			continue
		}
		if d := time.Until(at) - 2*time.Millisecond; d > 0 && !e.wait(a.timer, d) {
			return time.Time{}, false
		}
		if restore := waitInstant(at, 0); restore != nil { // one per slot: no hold
			restore()
		}
	}
}

// firstActivation reports whether slot j, activated at offset off (from
// the start instant) by a stage after the first, is the first slot of its
// worker that stage activates: slot j − 1 was already active when the
// stage began (the target then exceeded j − 1).
func (e *Engine) firstActivation(w *worker, j int, off time.Duration) bool {
	for i := len(e.stageStarts) - 1; i >= 1; i-- {
		if st := e.stageStarts[i]; off >= st {
			return w.sched.value(st) > float64(j-1)
		}
	}
	return false
}

// poll is next without waiting: with at zero, next's result; else slot j
// is not active before at, and nothing was taken from the budget. It never
// blocks, so that a session's read loop may call it (h2chain.go).
func (p closedPacer) poll(w *worker, j int) (start time.Time, ok bool, at time.Time) {
	e := p.e
	now := time.Now()
	if !e.windowEnd.IsZero() && !now.Before(e.windowEnd) || e.isStopped() || e.ended.Load() {
		return time.Time{}, false, time.Time{}
	}
	// The slot is active while the connection target exceeds j; if the
	// target never reaches j + 1 again, the slot is done.
	off, ok := w.sched.reaches(float64(j+1), now.Sub(e.mono))
	if !ok {
		return time.Time{}, false, time.Time{}
	}
	if at := e.mono.Add(off); at.After(now) {
		return time.Time{}, false, at
	}
	if !w.take() {
		return time.Time{}, false, time.Time{}
	}
	// The start is the last clock read: only the checks above (no wait)
	// come between it and the return.
	return now, true, time.Time{}
}
