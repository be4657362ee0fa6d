package engine

import (
	"time"
)

// rateConn is what a connection-rate ticket needs of a slot that sends one
// request at a time on its connection: HTTP/1.1's conn and HTTP/3's h3conn.
// Its methods are called from the slot's loop goroutine.
type rateConn interface {
	connSlot
	// do performs one request, opening the connection when there is none.
	do(t0 time.Time, en *entry) outcome
	// nextEntry returns the request the slot sends next.
	nextEntry() *entry
	// drop closes the slot's current connection.
	drop()
	// connected reports whether the slot has a connection.
	connected() bool
	// fresh makes the next open a new connection, not a reconnect.
	fresh()
}

// runConnection runs one ticket of a connection-rate plan (Plan.ConnectionRate,
// coordctl's --cps) intended at t0: it opens a connection at t0, sends the
// plan's RequestsPerConnection requests on it back to back and closes it.
// The connection's handshake latency (hist.HandshakeLatency) and the first
// request's latency and timeout run from t0, so they include any lateness
// of the start (no coordinated omission), the first request's also the
// connect and the handshake; each later request's runs from its own send,
// its intended start: right after the previous response, back to back.
// With no request (0: the handshake only) the connection is recorded
// alone, in the interval of its handshake's end, its handshake latency,
// lateness and missed start with it. It returns false when the slot is
// done (an outcome ended after the window). free is when the slot became
// free (conn.loop's), moved to the end of the connection's first outcome.
func runConnection(e *Engine, c rateConn, t0 time.Time, inWindow bool, free *time.Time) bool {
	c.fresh() // never a reconnect: each ticket opens its own
	defer c.drop()
	k := e.plan.RequestsPerConnection
	if k == 0 {
		return handshakeOnly(e, c, t0, inWindow, free)
	}
	t := c.accounts()
	for i := range k {
		start := t0
		if i > 0 {
			if e.ended.Load() || e.isStopped() {
				return true
			}
			start = time.Now()
			inWindow = !start.Before(e.windowStart)
		}
		if inWindow {
			t.issued.Add(1)
		}
		o := c.do(start, c.nextEntry())
		o.follow = i > 0
		if i == 0 {
			o.free, *free = *free, o.end
			if o.conn != nil {
				o.conn.intended = t0
			}
		}
		if !e.settle(c.worker(), t, start, inWindow, &o) {
			return false
		}
		if o.failed || !c.connected() {
			return true // the connection is gone: the ticket ends with it
		}
	}
	return true
}

// handshakeOnly opens a connection at t0 and records it (or its error),
// sending nothing. Only a failed open counts as issued (Result.Issued adds
// up requests, errors and those in flight).
func handshakeOnly(e *Engine, c rateConn, t0 time.Time, inWindow bool, free *time.Time) bool {
	w, t := c.worker(), c.accounts()
	o := outcome{start: t0, sent: time.Now(), noRequest: true}
	ci, derr := c.dial(e.stopCtx, false)
	o.end = time.Now()
	o.free, *free = *free, o.end
	if derr != nil {
		o.failed, o.kind = true, derr.kind
		if inWindow {
			t.issued.Add(1)
		}
	}
	if ci != nil {
		ci.intended = t0
	}
	o.conn = ci
	e.noteSend(o.sent)
	o.paced = true
	e.noteStage(t0, o.sent)
	o.classifyLate(t0)
	if !e.windowEnd.IsZero() && !o.end.Before(e.windowEnd) {
		if o.failed && inWindow {
			t.inFlight.Add(1)
		}
		w.rec.recordSide(e.intervalOf(e.windowEnd.Add(-1)), &o)
		return false
	}
	k := e.intervalOf(o.end)
	o.carried = !inWindow && k >= 0 // a warm-up ticket that ended in the window
	w.rec.record(k, &o)
	return true
}
