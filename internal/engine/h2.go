package engine

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
)

// HTTP/2 client on golang.org/x/net/http2's Framer, as h2load does it: each
// connection slot keeps one connection (session) with up to MaxStreams
// closed-loop stream slots, capped by the server's
// SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 section 5.1.2). Header blocks
// are HPACK-encoded per session with the dynamic table (h2hpack.go). On
// GOAWAY (RFC 9113 section 6.8) the session takes no new streams; streams
// above the last stream ID, which the server did not process, are sent once
// more on a new connection and counted as retries.

const (
	h2StreamWindow = 16 << 20 // our SETTINGS_INITIAL_WINDOW_SIZE
	h2ConnWindow   = 1 << 30  // our connection receive window
	h2UpdateAt     = 8 << 20  // send WINDOW_UPDATE after this many bytes
	// h2MaxHeaderBlock bounds a response header block held across
	// CONTINUATION frames (about what x/net's decoder buffered for a
	// field it had not finished: twice its 1 MiB string bound); past it
	// the connection ends with COMPRESSION_ERROR. Blocks are decoded by
	// h2hpackdec.go.
	h2MaxHeaderBlock = 2 << 20
)

// errH2Refused marks a stream the server never processed (above a GOAWAY's
// last stream ID, or REFUSED_STREAM): safe to send again.
var errH2Refused = errors.New("http2: stream not processed by the server")

// errH2NotSent marks a request that found its session going away before
// it was sent: it goes to another session, and is no retry.
var errH2NotSent = errors.New("http2: session going away")

// errH2Closed ends streams still open when a session closes.
var errH2Closed = errors.New("http2: connection closed")

// h2conn is one HTTP/2 connection slot.
type h2conn struct {
	e   *Engine
	w   *worker
	j   int          // index within the worker
	pos atomic.Int64 // next position in e.sched, shared by the slot's streams (outside count mode: countEntry)

	mu      sync.Mutex // guards cur, closed, dialing
	cond    *sync.Cond
	cur     *h2session
	closed  bool
	dialing bool
	dropped bool // a session was lost: the next dial is a reconnect
	// sessions are the slot's sessions not yet joined (the current one,
	// and ones draining after a GOAWAY): closeAll closes and joins them.
	sessions []*h2session

	tally tally
	// chained counts the requests the slot's read loops sent themselves
	// (h2chain.go), for tests and benchmarks.
	chained atomic.Int64
}

func newH2Conn(e *Engine, w *worker, idx, j int) *h2conn {
	c := &h2conn{e: e, w: w, j: j}
	c.pos.Store(int64(idx % len(e.sched)))
	c.cond = sync.NewCond(&c.mu)
	return c
}

// dial opens a session and makes it current (used by Prepare).
func (c *h2conn) dial(ctx context.Context, reconnect bool) (*connInfo, *dialError) {
	s, ci, derr := c.newSession(ctx, reconnect)
	if derr != nil {
		return nil, derr
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.closeAndJoin()
		return nil, &dialError{measure.ErrLocal, net.ErrClosed}
	}
	c.cur = s
	c.mu.Unlock()
	return ci, nil
}

// close closes every session of the slot and joins their goroutines.
func (c *h2conn) close() {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	c.closeAll()
}

// closeAll closes the slot's sessions and waits for their reader and
// flusher goroutines to exit.
func (c *h2conn) closeAll() {
	c.mu.Lock()
	ss := c.sessions
	c.sessions = nil
	c.cur = nil
	c.mu.Unlock()
	for _, s := range ss {
		s.closeAndJoin()
	}
}

// track adds s to the slot's sessions, joining those that already ended.
func (c *h2conn) track(s *h2session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := c.sessions[:0]
	for _, old := range c.sessions {
		if old.running.Load() == 0 {
			old.wg.Wait() // both goroutines have returned: no wait
			continue
		}
		live = append(live, old)
	}
	c.sessions = append(live, s)
}

// session returns the current usable session, dialling one (one dial at a
// time per slot) when there is none. ci is set when this call dialled.
func (c *h2conn) session() (*h2session, *connInfo, *dialError) {
	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return nil, nil, &dialError{measure.ErrLocal, net.ErrClosed}
		}
		if s := c.cur; s != nil && s.usable() {
			c.mu.Unlock()
			return s, nil, nil
		}
		if !c.dialing {
			break
		}
		c.cond.Wait()
	}
	c.dialing = true
	// A session exists but is unusable (GOAWAY, failure): this dial
	// replaces it, so it is a reconnect even before sessionLost ran.
	reconnect := (c.dropped || c.cur != nil) && !c.e.plan.NoKeepAlive
	c.dropped = false
	c.mu.Unlock()

	s, ci, derr := c.newSession(c.e.stopCtx, reconnect)

	c.mu.Lock()
	c.dialing = false
	c.cond.Broadcast()
	if derr != nil {
		c.dropped = reconnect
		c.mu.Unlock()
		return nil, nil, derr
	}
	if c.closed {
		c.mu.Unlock()
		s.closeAndJoin()
		return nil, nil, &dialError{measure.ErrLocal, net.ErrClosed}
	}
	c.cur = s
	c.mu.Unlock()
	return s, ci, nil
}

// sessionLost notes that s failed, so the next dial is a reconnect.
func (c *h2conn) sessionLost(s *h2session) {
	c.mu.Lock()
	if c.cur == s {
		c.cur = nil
		c.dropped = true
	}
	c.mu.Unlock()
}

// loop runs the slot's stream slots until the window ends or the count
// runs out.
func (c *h2conn) loop() {
	n := int(c.e.maxStreams.Load())
	if c.e.plan.NoKeepAlive {
		n = 1
	}
	var wg sync.WaitGroup
	for range n - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.streamLoop()
		}()
	}
	// The last stream slot runs on this goroutine: in closed loop the
	// first slot's goroutine is the one woken at the start instant
	// (Engine.startWait), and sends its first request without a hand-off.
	if n > 0 {
		c.streamLoop()
	}
	wg.Wait()
	c.mu.Lock()
	ss := append([]*h2session(nil), c.sessions...)
	c.mu.Unlock()
	for _, s := range ss {
		s.flushLast()
	}
	c.closeAll()
}

// openChain reports whether the slot's open-loop streams are chained by
// their sessions' read loops and pacers (h2chain.go, h2pacer.go): open
// loop with keep-alive.
func (c *h2conn) openChain() bool {
	return c.w.open && !c.e.plan.NoKeepAlive
}

// streamLoop is one stream slot.
func (c *h2conn) streamLoop() {
	e := c.e
	a := newAlarm()
	defer a.close()
	sl := &h2slot{c: c, wt: newH2Watch(), chain: c.openChain() || e.poller != nil && !c.w.open && !e.plan.NoKeepAlive}
	defer sl.wt.stop()
	sl.free = time.Now() // a slot opened by growth was free only from now
	back := backStream
	for {
		var t0 time.Time
		var ok bool
		if back == backTicket { // the read loop took the slot's next ticket
			t0, ok = openPacer{e}.await(c.w, sl.tk, a)
		} else {
			t0, ok = e.pacer.next(c.w, c.j, a)
		}
		if !ok {
			return
		}
		sl.pick(t0)
		back = c.do(sl)
		for back == backPicked { // the read loop settled a request and picked the next
			back = c.do(sl)
		}
		switch back {
		case backNext, backTicket:
			continue
		case backStop:
			return
		}
		o := &sl.o
		o.free, sl.free = sl.free, o.end
		if !e.settle(c.w, &c.tally, sl.t0, sl.inWindow, o) {
			return
		}
	}
}

// do performs slot sl's request on a stream, retrying once on a new
// connection when the server did not process it, and leaves its outcome in
// sl.o. While its stream is open the read loop may have settled it and
// sent more (h2chain.go): backStream, sl's request and outcome are the
// last one's; else what the slot was handed back with.
func (c *h2conn) do(sl *h2slot) h2back {
	o := &sl.o
	if c.w.open {
		o.sent = time.Now()
		if !o.sent.Before(sl.deadline) {
			o.end, o.failed, o.kind = o.sent, true, measure.ErrTimeout
			return backStream
		}
	}
	for attempt := 0; ; attempt++ {
		s, ci, derr := c.session()
		if ci != nil && (o.conn == nil || o.hops > 0) {
			o.addConn(ci) // the first's, or a redirect hop's
		}
		if derr != nil {
			o.end, o.failed, o.kind = time.Now(), true, derr.kind
			return backStream
		}
		r := s.roundTrip(sl)
		if r.back != backStream {
			return r.back
		}
		if r.chained {
			attempt = 0 // a request the read loop sent: its first attempt
		}
		if c.e.plan.NoKeepAlive {
			s.close(nil)
			c.sessionLost(s)
		}
		if errors.Is(r.err, errH2NotSent) {
			attempt--
			continue
		}
		if errors.Is(r.err, errH2Refused) && attempt == 0 {
			o.retried = true
			continue
		}
		// A response ends when its last frame arrived (roundTrip); an
		// error when this slot learnt of it.
		o.end = r.end
		if r.err != nil {
			o.end = time.Now()
		}
		if r.err == nil && o.end.After(sl.deadline) {
			r.err, r.kind = errTimeout, measure.ErrTimeout // never a success above the timeout
		}
		if r.err != nil {
			if !s.usable() {
				c.sessionLost(s)
			}
			o.failed, o.kind = true, r.kind
			return backStream
		}
		if r.loc != "" && c.e.plan.MaxRedirects > 0 && isRedirect(r.status) {
			// A redirect to follow (redirect.go): one more stream.
			o.size.addSizes(r.size)
			next, ok := sl.en.hop(c.e, r.status, []byte(r.loc), o.hops)
			if !ok {
				o.failed, o.kind = true, measure.ErrRedirect
				return backStream
			}
			o.hops++
			sl.en, attempt = next, -1
			continue
		}
		if o.hops > 0 {
			o.size.addSizes(r.size)
			r.size = o.size
		}
		o.status, o.size, o.ttfb = r.status, r.size, r.ttfb
		return backStream
	}
}

// noteMaxStreams lowers the effective streams per connection to n.
func (e *Engine) noteMaxStreams(n int) {
	for {
		cur := e.maxStreams.Load()
		if int32(n) >= cur || e.maxStreams.CompareAndSwap(cur, int32(n)) {
			return
		}
	}
}
