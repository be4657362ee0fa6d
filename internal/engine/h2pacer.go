package engine

import (
	"time"

	"golang.org/x/net/http2"
)

// The session's pacer: one goroutine per open-loop HTTP/2 session that
// sends its chained slots' tickets at their intended times. When a
// chained slot's stream ends (h2chain.go) the read loop settles it and
// takes the slot's next ticket; one not yet due is queued here instead of
// waking the slot's goroutine to wait for it on its own timer, then wake
// the flusher, then sleep on its stream. The pacer waits on the worker's
// clock (one high-resolution timer for the session's next ticket, not one
// per slot), and at each wake-up writes the HEADERS of every ticket due
// and flushes them with one write(2): a paced request costs a share of
// one wake-up of the pacer and one of the read loop, where it cost the
// slot's timer, its goroutine, the flusher and the hand-back of its
// stream's end. A ticket the pacer cannot send (the session is going away
// or full, a header block to encode, the window was ended, the engine
// stopped) is handed back to the slot's goroutine (backTicket, or
// backPicked once picked), which goes on as it would have.

// h2pacer is a session's queue of chained slots waiting for their
// tickets, in intended-time order (a session's read loop takes its
// tickets in schedule order, so a new one almost always goes last).
// Guarded by h2session.pmu.
type h2pacer struct {
	q    []*h2slot
	wake chan struct{} // buffered 1: the queue was empty
	// over: the pacer returned, or the clock reported the engine stopped
	// or the window ended; queue hands slots straight back.
	over bool
}

// queue gives slot sl, its next ticket taken (sl.tk) and not yet due, to
// the session's pacer. Read loop only, owning sl.
func (s *h2session) queue(sl *h2slot) {
	p := &s.pacer
	s.pmu.Lock()
	if p.over {
		s.pmu.Unlock()
		sl.handBack(backTicket)
		return
	}
	p.q = append(p.q, sl)
	i := len(p.q) - 1
	for ; i > 0 && p.q[i-1].tk.start.After(sl.tk.start); i-- {
		p.q[i] = p.q[i-1]
	}
	p.q[i] = sl
	wake := len(p.q) == 1
	s.pmu.Unlock()
	if wake {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// runPacer is the session's pacer goroutine: it waits for the first
// queued ticket on the worker's clock and sends every ticket due, until
// the session ends, handing back what it holds then.
func (s *h2session) runPacer() {
	p := &s.pacer
	w := s.c.w
	a := newAlarm()
	defer a.close()
	var due []*h2slot
	for {
		s.pmu.Lock()
		if len(p.q) == 0 || p.over {
			s.pmu.Unlock()
			select {
			case <-p.wake:
				continue
			case <-s.done:
				s.pmu.Lock()
				due = p.popLocked(due, len(p.q), true)
				s.pmu.Unlock()
				handBackAll(due)
				return
			}
		}
		head := p.q[0].tk.start
		s.pmu.Unlock()
		ok := w.clock.wait(head, a)
		now := time.Now()
		s.pmu.Lock()
		n := len(p.q) // stopped or ended: every one, whose goroutine gives it back
		if ok {
			n = 0
			for n < len(p.q) && !p.q[n].tk.start.After(now) {
				n++
			}
		}
		due = p.popLocked(due, n, !ok)
		s.pmu.Unlock()
		if !ok {
			handBackAll(due)
			continue
		}
		s.sendDue(due)
	}
}

// popLocked moves the queue's first n slots into due (emptied first) and
// returns it; over: the pacer takes no more (queue hands slots straight
// back). Called with pmu held.
func (p *h2pacer) popLocked(due []*h2slot, n int, over bool) []*h2slot {
	due = append(due[:0], p.q[:n]...)
	m := copy(p.q, p.q[n:])
	clear(p.q[m:])
	p.q = p.q[:m]
	p.over = p.over || over
	return due
}

// handBackAll gives each slot its ticket back to wait for (backTicket).
func handBackAll(slots []*h2slot) {
	for _, sl := range slots {
		sl.handBack(backTicket)
	}
}

// sendDue sends the requests of the slots whose tickets are due, with
// one flush, handing back those it cannot send.
func (s *h2session) sendDue(due []*h2slot) {
	e := s.c.e
	s.wmu.Lock()
	var err error
	i := 0
	for ; i < len(due) && err == nil; i++ {
		sl := due[i]
		if e.endedBy(sl.tk.start) {
			sl.handBack(backTicket) // await gives it back
			continue
		}
		sl.pick(sl.tk.start)
		if !sl.chainable() {
			sl.handBack(backPicked)
			continue
		}
		st, block, ok := s.openChained(sl, true)
		if !ok {
			sl.handBack(backPicked)
			continue
		}
		// Once its HEADERS may have left (a full bw writes them out), the
		// slot is the read loop's: nothing of it is read after the write.
		wt, c, deadline := sl.wt, sl.c, sl.deadline
		if s.bw.Available() < 9+len(block) {
			s.setWriteDeadline(deadline) // the HEADERS reach the connection now
		}
		err = s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: block, EndStream: true, EndHeaders: true})
		s.written = st.id
		if err == nil {
			// Watched before the flush, so before its response can end
			// it (the read loop then owns the slot and may open and watch
			// a later stream, which a late watch here would displace).
			// Under wmu without deadlock: the watch's fire waits for wmu
			// only to reset the stream it times out, which until this
			// call is one that already ended.
			wt.watch(s, st, deadline)
			c.chained.Add(1)
		}
	}
	if err == nil && s.bw.Buffered() > 0 {
		s.freshWriteDeadline()
		if err = s.bw.Flush(); err == nil {
			s.flushed.Store(s.written)
		}
	}
	s.wmu.Unlock()
	handBackAll(due[i:]) // after a failed write: another session's
	if err != nil {
		// Ends the streams opened (their goroutines take them:
		// backStream) and the session.
		s.failKind(err, classify(err, false), true)
	}
}
