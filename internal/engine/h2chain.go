package engine

import (
	"time"

	"golang.org/x/net/http2"
)

// Closed-loop HTTP/2 requests chained by the session's read loop, as
// h2load's event loop does: when a stream of a closed-loop stream slot
// ends with a plain response, the read loop itself records it (settle),
// asks the pacer for the slot's next request without waiting (poll) and
// writes its HEADERS, instead of waking the slot's goroutine to do it and
// waking the flusher from there. A request costs no goroutine switch; the
// slot's goroutine sleeps until the chain breaks: anything but a plain
// response (an error, a timeout, a redirect to follow), a pacer that
// would wait or says the slot is done, a request with a body, a session
// that takes no new stream (GOAWAY, the stream limit), a write lock held
// by another writer. It is then handed the slot back (h2back) and goes on
// as it would have. The counts are the same: the read loop settles, counts
// issued requests and picks mix entries exactly as the slot's goroutine
// does. Open loop chains too: a slot's next ticket, when not yet due, is
// queued for its session's pacer (h2pacer.go), which sends it at its
// intended time as the slot's goroutine would have.

// h2back is what a slot's goroutine finds when it is handed its slot
// back (the one value on its stream-end channel).
type h2back uint8

const (
	// backStream: the slot's current stream (h2slot.cur) ended; the
	// goroutine takes its end as roundTrip always did.
	backStream h2back = iota
	// backPicked: the read loop settled the last request and picked the
	// next one (h2slot's request), which the goroutine sends.
	backPicked
	// backNext: the read loop settled the last request; the goroutine
	// asks the pacer for the next one.
	backNext
	// backStop: the read loop settled the last request and the slot is
	// done (the window ended, the count ran out, the engine stopped).
	backStop
	// backTicket: the read loop settled the last request and took the
	// slot's next ticket (h2slot.tk) from the open-loop schedule; the
	// goroutine waits for it (openPacer.await) and sends it.
	backTicket
)

// h2slot is one closed-loop (or open-loop) stream slot of an h2conn: the
// request it is sending and the outcome built so far. It is owned by the
// slot's goroutine, or, from the end of a chainable stream of it until
// the read loop hands it back, by that session's read loop: ownership
// passes by the stream's publication under the session's mu and by the
// stream-end channel.
type h2slot struct {
	c  *h2conn
	wt *h2watch
	// chain: the read loop may continue this slot (keep-alive; closed
	// loop with a pacer that polls, or open loop).
	chain bool
	// free is when the slot was last free (its last request's end, or
	// when it opened), tk its open-loop ticket while the session's pacer
	// holds it (h2pacer.go) or the goroutine is handed it (backTicket).
	free time.Time
	tk   ticket

	t0       time.Time // the request's start (the pacer's)
	inWindow bool      // t0 is in the window: counted as issued
	en       *entry
	deadline time.Time // t0 + the plan's timeout
	o        outcome   // the outcome so far: start, sent, entry, connections, retry, hops

	// cur is the slot's latest stream, set when it is opened (under its
	// session's mu); back is why the goroutine was handed the slot back
	// (backStream unless the read loop says otherwise).
	cur  *h2stream
	back h2back
}

// pick makes the request started at t0 the slot's: counted as issued when
// in the window, with the next mix entry.
func (sl *h2slot) pick(t0 time.Time) {
	c := sl.c
	e := c.e
	sl.t0 = t0
	sl.inWindow = !t0.Before(e.windowStart)
	if sl.inWindow {
		c.tally.issued.Add(1)
	}
	sl.en = e.nextSharedEntry(c.w, &c.pos)
	sl.deadline = t0.Add(e.plan.Timeout)
	sl.o = outcome{start: t0, sent: t0, entry: sl.en.idx}
}

// chainable reports whether the read loop may end the slot's request in
// flight and continue the slot: a request without a body and no redirect
// hop.
func (sl *h2slot) chainable() bool {
	return sl.chain && len(sl.en.body) == 0 && !sl.en.isHop && sl.o.hops == 0
}

// handBack gives the slot back to its goroutine with reason b. Read loop
// only, owning the slot.
func (sl *h2slot) handBack(b h2back) {
	sl.back = b
	select {
	case sl.wt.done <- struct{}{}:
	default: // never: the goroutine waits for exactly this value
	}
}

// runChains continues the slots whose streams the last frame ended with
// a plain response (s.chains, read loop only): each one's request is
// settled and its next one sent, or the slot handed back.
func (s *h2session) runChains() {
	for i, st := range s.chains {
		s.chains[i] = nil
		s.continueSlot(st)
	}
	s.chains = s.chains[:0]
}

// continueSlot ends st's request (its stream ended with a complete
// response, not yet seen by the slot's goroutine) and sends the slot's next
// request on s, as the slot's goroutine would (streamLoop, do, roundTrip),
// or hands the slot back where the goroutine would do more than that. In
// open loop the next request is the slot's next ticket: sent now when it
// is due, else queued for the session's pacer (h2pacer.go), which sends it
// at its time.
func (s *h2session) continueSlot(st *h2stream) {
	sl := st.chain
	c := sl.c
	e := c.e
	if st.end.After(sl.deadline) || st.location != "" && e.plan.MaxRedirects > 0 && isRedirect(st.status) {
		sl.handBack(backStream) // a timeout, a redirect to follow: do's
		return
	}
	o := &sl.o
	o.status, o.size, o.end = st.status, st.size, st.end
	o.ttfb = max(st.first.Sub(st.sentAt), 0)
	o.free, sl.free = sl.free, o.end
	if !e.settle(c.w, &c.tally, sl.t0, sl.inWindow, o) {
		sl.handBack(backStop)
		return
	}
	var t0 time.Time
	if c.w.open {
		tk, ok := openPacer{e}.take(c.w)
		if !ok {
			sl.handBack(backStop)
			return
		}
		sl.tk = tk
		if tk.first || e.endedBy(tk.start) {
			sl.handBack(backTicket) // an instant's wait, or a give-back: await's
			return
		}
		if tk.start.After(time.Now()) {
			s.queue(sl)
			return
		}
		t0 = tk.start
	} else {
		var ok bool
		var at time.Time
		t0, ok, at = e.poller.poll(c.w, c.j)
		if !at.IsZero() {
			sl.handBack(backNext) // the slot waits for a ramp: the goroutine's
			return
		}
		if !ok {
			sl.handBack(backStop)
			return
		}
	}
	sl.pick(t0)
	if !sl.chainable() || !s.wmu.TryLock() {
		// A body to send (it may wait for window), or another writer
		// holds the lock (never wait for it here: the read loop must keep
		// reading).
		sl.handBack(backPicked)
		return
	}
	nst, block, ok := s.openChained(sl, false)
	if !ok {
		s.wmu.Unlock()
		sl.handBack(backPicked) // the goroutine finds another session, waits or encodes
		return
	}
	err := s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: nst.id, BlockFragment: block, EndStream: true, EndHeaders: true})
	s.written = nst.id
	s.wmu.Unlock()
	if err != nil {
		// Ends nst (the goroutine takes it: backStream) and the session.
		s.failKind(err, classify(err, false), true)
		return
	}
	s.kick()
	sl.wt.watch(s, nst, sl.deadline)
	c.chained.Add(1)
}

// openChained opens the next stream of slot sl, whose request is picked,
// for its HEADERS (block) to be written by the caller, which holds wmu: false
// when the goroutine must send it (the session takes no new stream, the
// request's header block is not cached and encoding it would change the
// dynamic table, the HEADERS would not fit in bw, an open-loop send past
// its timeout). An open-loop request's send time (sl.o.sent) is stamped
// here, a closed-loop one's is its start. mayWrite: the caller may block
// on a write (the session's pacer; not the read loop), so the HEADERS may
// reach the connection.
func (s *h2session) openChained(sl *h2slot, mayWrite bool) (st *h2stream, block []byte, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead || s.goaway || s.active >= s.limit {
		return nil, nil, false
	}
	block = s.hpack.cached(sl.en)
	if block == nil || !mayWrite && s.bw.Available() < 9+len(block) {
		// A block to encode changes the dynamic table (the goroutine
		// encodes it), or the HEADERS would reach the connection now:
		// never block the read loop on a write.
		return nil, nil, false
	}
	sent := sl.t0
	if sl.c.w.open {
		sent = time.Now()
		if !sent.Before(sl.deadline) {
			return nil, nil, false // do's timeout
		}
		sl.o.sent = sent
	}
	s.active++
	return s.openLocked(sl, sent), block, true
}

// openLocked opens slot sl's next stream, sent at sent, on s: the next
// stream ID, in s.streams, the slot's current stream. Called with wmu and
// mu held, the slot's stream count (s.active) taken.
func (s *h2session) openLocked(sl *h2slot, sent time.Time) *h2stream {
	st := &h2stream{id: s.nextID, done: sl.wt.done, sendWindow: int64(s.peerWindow), sentAt: sent}
	if sl.chainable() {
		st.chain = sl
	}
	s.nextID += 2
	s.streams[st.id] = st
	sl.cur, sl.back = st, backStream
	return st
}

// completeLocked ends stream st with its complete response (read loop
// only, mu held): a chainable stream is queued for runChains instead of
// waking its slot's goroutine.
func (s *h2session) completeLocked(id uint32, st *h2stream) {
	if st.chain == nil {
		s.endStreamLocked(id, st, nil, 0)
		return
	}
	if s.removeLocked(id, st, nil, 0) {
		s.chains = append(s.chains, st)
	}
}
