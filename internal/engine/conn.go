package engine

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/phalanxload/phalanx/internal/http1"
	"github.com/phalanxload/phalanx/internal/measure"
)

// conn is one HTTP/1.1 connection slot: a goroutine that keeps one
// connection open (reopening it after errors and server closes, or for every
// request without keep-alive) and sends requests in closed loop.
type conn struct {
	e     *Engine
	w     *worker
	j     int    // index within the worker (stage targets activate slots in order)
	pos   int    // next position in e.sched (outside count mode: countEntry)
	alarm *alarm // the loop goroutine's

	mu     sync.Mutex // guards nc and closed against stop()
	nc     net.Conn
	closed bool

	tally tally

	// Owned by the loop goroutine (and by Prepare's dial before it).
	// br reads nc's responses. Over TLS it is taken from readers only once
	// a response's first byte has arrived (lead) and given back when the
	// response has been read whole, so a connection waiting for its
	// response or for its next request holds no read buffer; in clear text
	// it is the connection's own (see readResponse).
	br        *bufio.Reader
	lead      leadReader
	dropped   bool // the last connection was lost: the next open is a reconnect
	resp      http1.Response
	idleSince time.Time       // when nc was opened or last answered
	raw       syscall.RawConn // nc's socket (under TLS), for peek; nil if none
	tls       bool            // nc is a *tls.Conn
	peekFn    func(fd uintptr) bool
	peeked    peekState
}

// IdleCheck is how long a keep-alive connection must have been idle
// before a request looks whether the server closed it meanwhile (one
// poll(2) with a zero timeout for POLLRDHUP, Linux only). A busy connection,
// answered and reused at once, never pays for the look; a close the look
// misses (it races the write) is caught by the resend in conn.do.
const IdleCheck = time.Millisecond

// ResendIdle is how long a keep-alive connection must have been idle for
// a request that meets the server's close or reset before any response
// byte to be sent again (conn.resend): well above a busy connection's
// scheduling gaps on a loaded machine, which would otherwise let a reset
// under load pass for an idle close (field case C07), and well below any
// server's idle timeout (NGINX's shortest sensible 1 s; Apache's 5 s).
const ResendIdle = 100 * time.Millisecond

// peekState is what a look at an idle connection's socket found.
type peekState uint8

const (
	peekIdle   peekState = iota // nothing pending: the connection is usable
	peekData                    // bytes pending, no close (a TLS record, an unsolicited response)
	peekClosed                  // the peer closed or reset the connection
)

func newConn(e *Engine, w *worker, i, j int) *conn {
	c := &conn{e: e, w: w, j: j, pos: i % len(e.sched), alarm: newAlarm()}
	c.resp.WantLocation = e.plan.MaxRedirects > 0 // redirect.go
	c.peekFn = func(fd uintptr) bool {
		c.peeked = peekFd(fd)
		return true
	}
	return c
}

// dialError is a failed connect or handshake.
type dialError struct {
	kind measure.ErrorKind
	err  error
}

func (d *dialError) Error() string { return d.err.Error() }
func (d *dialError) Unwrap() error { return d.err }

// dialConn opens a TCP connection and, for https, completes the TLS
// handshake with w's configuration, timing both phases. The whole is
// bounded by the plan's timeout.
func dialConn(ctx context.Context, e *Engine, w *worker, reconnect bool) (net.Conn, *tls.Conn, *connInfo, *dialError) {
	ctx, cancel := context.WithTimeout(ctx, e.plan.Timeout)
	defer cancel()
	var d net.Dialer
	if n := len(w.sources); n > 0 {
		d.LocalAddr = w.sources[(w.source.Add(1)-1)%int64(n)]
	}
	t0 := time.Now()
	raw, err := d.DialContext(ctx, "tcp", e.addr)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, nil, nil, &dialError{measure.ErrTimeout, fmt.Errorf("connect %s: %w", e.addr, err)}
		}
		if kind := classifyDial(err, false); kind == measure.ErrPorts {
			return nil, nil, nil, &dialError{kind, fmt.Errorf("connect %s: %w: %s", e.addr, err, measure.PortsAdvice)}
		}
		return nil, nil, nil, &dialError{classifyDial(err, false), fmt.Errorf("connect %s: %w", e.addr, err)}
	}
	t1 := time.Now()
	if tc, ok := raw.(*net.TCPConn); ok && e.plan.CloseReset {
		_ = tc.SetLinger(0) // the close sends a reset: no TIME_WAIT here
	}
	raw = rawIO(raw)
	ci := &connInfo{connect: micros(t1.Sub(t0)), reconnect: reconnect}
	if w.tlsConf == nil {
		ci.done = t1
		return raw, nil, ci, nil
	}
	conf, oc := w.tlsConf, (*offerCache)(nil)
	if w.resume != nil {
		conf, oc = w.resume.next()
	}
	tc := tls.Client(raw, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		if ctx.Err() == context.DeadlineExceeded {
			return nil, nil, nil, &dialError{measure.ErrTimeout, fmt.Errorf("tls handshake with %s: %w", e.addr, err)}
		}
		return nil, nil, nil, &dialError{classifyDial(err, true), fmt.Errorf("tls handshake with %s: %w%s", e.addr, err, verifyHint(err, e.plan.TLS))}
	}
	ci.done = time.Now()
	ci.handshake = micros(ci.done.Sub(t1))
	describeTLS(ci, tc.ConnectionState())
	ci.offered = oc != nil && oc.offered
	return tc, tc, ci, nil
}

func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }

// dial opens a new connection and makes it current.
func (c *conn) dial(ctx context.Context, reconnect bool) (*connInfo, *dialError) {
	nc, _, ci, derr := dialConn(ctx, c.e, c.w, reconnect)
	if derr != nil {
		return nil, derr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		nc.Close()
		return nil, &dialError{measure.ErrLocal, net.ErrClosed}
	}
	c.nc = nc
	c.idleSince = time.Now()
	c.raw = nil
	base := nc
	tc, isTLS := nc.(*tls.Conn)
	if isTLS {
		base = tc.NetConn()
	}
	c.tls = isTLS
	c.lead = leadReader{nc: nc}
	switch {
	case isTLS:
		c.releaseReader() // bytes buffered from the last connection are not this one's
	case c.br == nil:
		c.br = bufio.NewReaderSize(&c.lead, readBufSize)
	default:
		c.br.Reset(&c.lead)
	}
	if sc, ok := base.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	return ci, nil
}

// closedByPeer reports whether the idle connection can no longer carry a
// request: the server closed its side or reset it (its idle timeout), or,
// in clear text, sent something unasked (a 408 before its close). Bytes
// pending on a TLS connection whose peer has not closed are post-handshake
// messages (the session tickets a server sends after the handshake, still
// unread on a prepared connection): it is usable, and they are read with
// the response. A close that arrives after the look is caught by the
// resend in do.
func (c *conn) closedByPeer() bool {
	if c.raw == nil {
		return false
	}
	if err := c.raw.Read(c.peekFn); err != nil {
		return true
	}
	switch c.peeked {
	case peekClosed:
		return true
	case peekData:
		return !c.tls
	}
	return false
}

// connected reports whether the slot has a connection (loop goroutine,
// which alone sets nc).
func (c *conn) connected() bool { return c.nc != nil }

// fresh makes the slot's next open a new connection, not a reconnect: a
// connection-rate ticket opens its own.
func (c *conn) fresh() { c.dropped = false }

// drop closes the current connection.
func (c *conn) drop() {
	c.mu.Lock()
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
	c.mu.Unlock()
}

func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	if c.nc != nil {
		c.nc.Close()
	}
	c.mu.Unlock()
}

// outcome is how one request ended.
type outcome struct {
	// start is the request's start: its intended send time in open loop,
	// else when it began. sent is when it actually began (its connect or
	// its write). Latency is end−start; service time end−sent.
	start, sent, end time.Time
	paced            bool // open loop: sent − start is the send's lateness
	missed           bool
	// free is when the slot that sent the request became free (its
	// previous request's end; for its first, when the slot started): in open loop, a missed
	// send whose slot was busy until less than MissThreshold before it was
	// sent was late because every connection was busy (backlogged), not by
	// the client's own scheduling.
	free       time.Time
	backlogged bool
	status     int
	kind       measure.ErrorKind
	failed     bool
	size       sizes
	ttfb       time.Duration
	conn       *connInfo // the connection this request opened, if any
	retried    bool      // sent twice: the server did not process the first
	// hops counts the redirect hops followed (plan.MaxRedirects), each a
	// request sent; hopConns the connections they opened beyond conn.
	hops     int64
	hopConns []*connInfo
	entry    int // the request's index in the mix

	// queued: the slot was still busy at the intended time (free after
	// it); clientLate: the send left more than measure.ClientLateLimit
	// after both (the client's own delay).
	queued, clientLate bool
	// carried: a paced send intended in the warm-up that ended in the
	// window (or was in flight at its end): counted there as a request
	// (by its end) but not as one of the window's scheduled sends, so its
	// lateness and late-send counts stay out of the window's.
	carried bool
	// follow: a connection-rate connection's request after its first,
	// sent at once (not paced: no lateness, never missed).
	follow bool
	// noRequest: a connection-rate connection that sends nothing; only
	// its connection, lateness, missed start and error are recorded.
	noRequest bool
}

// sizes are a response's bytes: on the wire, of its header sections and
// of its body (measure.Counts' BytesRead, HeaderBytes, BodyBytes), and its
// Content-Encoding.
type sizes struct {
	wire, header, body int64
	// fields is the header sections decoded (measure.Counts'
	// HeaderFieldBytes).
	fields int64
	enc    measure.Encoding
}

// loop sends requests in closed loop from the start instant until the
// window's end or the count runs out. A request that ends after the window
// counts as in flight; none is issued after it.
func (c *conn) loop() {
	defer c.drop()
	defer c.alarm.close()
	serialLoop(c.e, c, c.j, c.alarm)
}

// serialLoop runs slot c (slot j of its worker), which sends one request
// at a time on its connection (HTTP/1.1's conn, HTTP/3's h3conn), from
// the start instant until the pacer says it is done: each request, or
// with a connection rate each ticket's connection (runConnection), then
// its bookkeeping (settle). A request that ends after the window counts
// as in flight and none is issued after it. a is the loop goroutine's
// alarm.
func serialLoop(e *Engine, c rateConn, j int, a *alarm) {
	w, t := c.worker(), c.accounts()
	free := time.Now() // a slot opened by growth was free only from now
	for {
		t0, ok := e.pacer.next(w, j, a)
		if !ok {
			return
		}
		inWindow := !t0.Before(e.windowStart)
		if e.plan.ConnectionRate {
			if !runConnection(e, c, t0, inWindow, &free) {
				return
			}
			continue
		}
		if inWindow {
			t.issued.Add(1)
		}
		o := c.do(t0, c.nextEntry())
		o.free, free = free, o.end
		if !e.settle(w, t, t0, inWindow, &o) {
			return
		}
	}
}

// nextEntry returns the request the slot sends next: count mode's by its
// global index, else the next of the slot's cycle through the mix.
func (c *conn) nextEntry() *entry { return c.e.nextEntry(c.w, &c.pos) }

// nextEntry returns the request a slot of worker w sends next: count
// mode's by its global index, else the next of the slot's cycle through
// the mix, from its position *pos (advanced).
func (e *Engine) nextEntry(w *worker, pos *int) *entry {
	if w.counting {
		return e.countEntry(w)
	}
	en := &e.entries[e.sched[*pos]]
	if *pos++; *pos == len(e.sched) {
		*pos = 0
	}
	return en
}

// nextSharedEntry is nextEntry for a slot whose stream slots share the
// position *pos in the mix's cycle (advanced atomically).
func (e *Engine) nextSharedEntry(w *worker, pos *atomic.Int64) *entry {
	if w.counting {
		return e.countEntry(w)
	}
	return &e.entries[e.sched[(pos.Add(1)-1)%int64(len(e.sched))]]
}

// tally is a connection slot's request accounting, shared by its
// goroutines (one for HTTP/1.1, one per stream slot for HTTP/2) and read by
// Run after they exit.
type tally struct {
	issued   atomic.Int64
	inFlight atomic.Int64
	lastEnd  atomic.Int64 // 1 + ns from the start instant of the latest in-window end
}

// settle does the bookkeeping after one request intended (or begun) at t0:
// the first-send and stage notes, missed sends, and either the in-flight
// count, when it ended after the window (then the slot stops: settle
// returns false), or its outcome in its interval.
func (e *Engine) settle(w *worker, t *tally, t0 time.Time, inWindow bool, o *outcome) bool {
	e.noteSend(o.sent)
	if w.open && !o.follow {
		o.paced = true
		e.noteStage(t0, o.sent)
		o.classifyLate(t0)
	}
	if !e.windowEnd.IsZero() && !o.end.Before(e.windowEnd) {
		if !inWindow {
			t.issued.Add(1) // carried from the warm-up, in flight at the end
			o.carried = o.paced
		}
		t.inFlight.Add(1)
		w.rec.recordSide(e.intervalOf(e.windowEnd.Add(-1)), o)
		return false
	}
	k := e.intervalOf(o.end)
	if k >= 0 {
		if !inWindow {
			t.issued.Add(1) // issued in the warm-up, ended in the window
			o.carried = o.paced
		}
		end := int64(o.end.Sub(e.mono)) + 1
		for {
			cur := t.lastEnd.Load()
			if end <= cur || t.lastEnd.CompareAndSwap(cur, end) {
				break
			}
		}
	}
	w.rec.record(k, o)
	return true
}

// watch grows an open-loop worker's connections while its schedule has a
// request due for more than MissThreshold that no connection has taken
// (every one is busy: a stalled server, a burst), up to the worker's cap.
// At the cap it counts each such request once as growth refused
// (measure.Counts.GrowthRefused), in the interval it was found: a request
// the cap kept waiting, never a silent one. It adds a connection for each
// request late and untaken at once, wakes at most about once per
// MissThreshold, whatever the rate, and stops at the window's end.
func (e *Engine) watch(w *worker) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	refused := int64(-1) // the last ticket counted as growth refused
	for {
		if w.counting && w.budget.Load() <= 0 {
			return // count mode: every request is taken
		}
		k := max(w.ticket.Load(), refused+1)
		off, ok := w.sched.at(float64(k) + w.phase)
		if !ok {
			return
		}
		due := e.mono.Add(e.paced(off))
		if !e.windowEnd.IsZero() && !due.Before(e.windowEnd) {
			return
		}
		wait := max(time.Until(due.Add(MissThreshold)), MissThreshold)
		if !e.wait(timer, wait) {
			return
		}
		if !e.windowEnd.IsZero() && !time.Now().Before(e.windowEnd) {
			// The window is over: a slot added now would take nothing (the
			// pacer is done), and the tickets left are unsent. Growing one
			// per late ticket until the cap held the run's last interval
			// for cap × MissThreshold (a connection rate at 1,000/s on a
			// 50-ms server: 5 s, and the agent was given up as silent).
			return
		}
		if w.ticket.Load() > k || time.Since(due) <= MissThreshold {
			continue // taken, or not late yet
		}
		// Ticket k is late and untaken: add a connection to take it and
		// one for each later ticket as late (a burst, or a connection
		// rate's slow handshakes, needs them at once: one per wake-up
		// grew at most 200 a second), or, at the cap, count it and every
		// later one as late.
		last := e.lastDue(w, time.Now().Add(-MissThreshold))
		late := max(last-k+1, 1)
		if m := int64(e.maxStreams.Load()); m > 1 {
			late = (late + m - 1) / m // an HTTP/2 or HTTP/3 connection adds m stream slots
		}
		grew := false
		for range late {
			if !e.grow(w) {
				break
			}
			grew = true
		}
		if grew || e.isStopped() {
			continue
		}
		if last < k {
			continue
		}
		refused = last
		at := time.Now()
		if !e.windowEnd.IsZero() && !at.Before(e.windowEnd) {
			at = e.windowEnd.Add(-1)
		}
		w.rec.mu.Lock()
		w.rec.counts(e.intervalOf(at)).GrowthRefused += last - k + 1
		w.rec.mu.Unlock()
	}
}

// lastDue returns the last of worker w's tickets due at or before t and
// before the window's end (-1: none).
func (e *Engine) lastDue(w *worker, t time.Time) int64 {
	if !e.windowEnd.IsZero() && !t.Before(e.windowEnd) {
		t = e.windowEnd.Add(-1)
	}
	// Paced at or before t is scheduled before t + 1 ns's cutoff.
	cut := e.rawCutoff(t.Sub(e.mono) + 1)
	due := w.sched.cumulative(cut) - w.phase
	if due < 0 {
		return -1
	}
	n := int64(due)
	if at, ok := w.sched.at(float64(n) + w.phase); !ok || at >= cut {
		n-- // rounding: ticket n falls after t
	}
	return n
}

// grow adds a connection slot to an open-loop worker that fell behind its
// schedule, up to its cap, and reports whether it did (false at the cap or
// once stopped). The new slot dials when it takes its first ticket, so its
// connect is part of that request's latency.
func (e *Engine) grow(w *worker) bool {
	for {
		n := w.conns.Load()
		if n >= w.maxConns || e.isStopped() {
			return false
		}
		if w.conns.CompareAndSwap(n, n+1) {
			break
		}
	}
	e.connsMu.Lock()
	c := e.newSlot(e, w, len(e.slots), int(w.conns.Load()-1))
	e.slots = append(e.slots, c)
	e.wg.Add(1)
	e.connsMu.Unlock()
	go func() {
		defer e.wg.Done()
		c.loop()
	}()
	return true
}

// classifyLate judges paced send o, intended at t0, by its lateness: it
// waited for its busy connection (queued: the slot freed after t0), it
// left more than measure.ClientLateLimit after both t0 and that freeing
// (clientLate: the client's own delay), it left more than MissThreshold
// after t0 (missed), and then whether its connection freed less than
// MissThreshold before it left (backlogged: late for the connection).
func (o *outcome) classifyLate(t0 time.Time) {
	ready := maxTime(t0, o.free)
	o.queued = o.free.After(t0)
	o.clientLate = o.sent.Sub(ready) > measure.ClientLateLimit
	if o.sent.Sub(t0) > MissThreshold {
		o.missed = true
		o.backlogged = o.sent.Sub(ready) <= MissThreshold
	}
}

// recordSide records, for a request still in flight when the window
// closed, what it did besides its outcome: the connection it opened and
// its retry, which are real even though the request is not counted.
func (r *recorder) recordSide(k int, o *outcome) {
	if o.conn == nil && !o.retried && o.hops == 0 && !o.carried {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if o.carried {
		r.counts(k).Carried++
	}
	r.recordTraffic(k, o)
	if o.retried {
		r.counts(k).Retries++
	}
}

// record records one request's outcome in interval k (k < 0: warm-up).
func (r *recorder) record(k int, o *outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recordTraffic(k, o)
	cnt := r.counts(k)
	if o.retried {
		cnt.Retries++
	}
	switch {
	case o.carried:
		// A warm-up ticket: not one of the window's scheduled sends.
		cnt.Carried++
	case o.paced:
		if o.missed {
			cnt.Missed++
			if o.backlogged {
				cnt.Backlogged++
			}
		}
		if o.queued {
			cnt.Queued++
		}
		if o.clientLate {
			cnt.ClientLate++
		}
		if k >= 0 {
			r.slotFor(k).hists.Lateness.Record(max(o.sent.Sub(o.start), 0))
		}
	}
	if k >= 0 && r.mix != nil && !o.noRequest {
		r.mix.record(o.entry, o)
	}
	if o.failed {
		cnt.Errors[o.kind]++
		return
	}
	if o.noRequest {
		return
	}
	cnt.Requests++
	cnt.BytesRead += o.size.wire
	cnt.HeaderBytes += o.size.header
	cnt.BodyBytes += o.size.body
	cnt.HeaderFieldBytes += o.size.fields
	cnt.Encodings[o.size.enc]++
	cnt.Status[o.status]++
	if k >= 0 {
		s := r.slotFor(k)
		lat := o.end.Sub(o.start)
		s.hists.Latency.Record(lat)
		if o.status >= 200 && o.status <= 399 {
			s.hists.OK.Record(lat)
		}
		s.hists.TTFB.Record(o.ttfb)
		if o.sent != o.start {
			s.hists.Service.Record(o.end.Sub(o.sent))
		}
	}
}

// do performs one request, opening a connection first when there is none.
// The request's latency and timeout run from t0, so a request that has to
// open its connection includes the connect and handshake.
//
// In open loop t0 is the intended send time, which may be past: the
// deadline still runs from it (a request that cannot be sent before its
// deadline is a timeout, unsent), so overload shows as timeouts.
func (c *conn) do(t0 time.Time, en *entry) outcome {
	e := c.e
	o := outcome{start: t0, sent: t0, entry: en.idx}
	if c.w.open {
		o.sent = time.Now()
		if !o.sent.Before(t0.Add(e.plan.Timeout)) {
			o.end, o.failed, o.kind = o.sent, true, measure.ErrTimeout
			return o
		}
	}
	c.mu.Lock()
	nc := c.nc
	c.mu.Unlock()
	// look: the connection waited at least IdleCheck since its last answer
	// (or its open); idle: at least ResendIdle, long enough for a server's
	// idle timeout to have closed it.
	var waited time.Duration
	if nc != nil && !e.plan.NoKeepAlive {
		waited = o.sent.Sub(c.idleSince)
	}
	idle := waited >= ResendIdle
	if waited >= IdleCheck && !e.noIdleLook && c.closedByPeer() {
		c.drop() // closed while idle: reopen before sending (a reconnect)
		c.dropped = true
		nc = nil
	}
	var tw time.Time
	cur := en // the exchange's current hop
	req, head := en.h1, en.head
hops:
	for {
		fresh := nc == nil
		if fresh {
			reconnect := c.dropped && !e.plan.NoKeepAlive
			c.dropped = false
			ci, derr := c.dial(e.stopCtx, reconnect)
			if derr != nil {
				c.dropped = reconnect
				o.end, o.failed, o.kind = time.Now(), true, derr.kind
				return o
			}
			o.addConn(ci)
			c.mu.Lock()
			nc = c.nc
			c.mu.Unlock()
		}
		_ = nc.SetDeadline(t0.Add(e.plan.Timeout))
		if _, err := nc.Write(req); err != nil {
			kind := classify(err, false)
			if c.resend(&o, fresh || !idle, kind) {
				nc = nil
				continue
			}
			return c.fail(o, kind)
		}
		tw = time.Now()
		started := false
		if err := c.readResponse(head, &started); err != nil {
			kind := classify(err, started)
			if !started && c.resend(&o, fresh || !idle, kind) {
				nc = nil
				continue
			}
			return c.fail(o, kind)
		}
		if e.plan.MaxRedirects == 0 || !isRedirect(c.resp.Status) || len(c.resp.Location) == 0 {
			break
		}
		// A redirect to follow (redirect.go): its bytes are the exchange's,
		// its next hop is one more request on this slot.
		o.size.add(&c.resp)
		next, ok := cur.hop(e, c.resp.Status, c.resp.Location, o.hops)
		if !ok {
			o.end = time.Now()
			return c.failKeep(o, measure.ErrRedirect)
		}
		o.hops++
		cur, req, head = next, next.h1, next.head
		if c.resp.Close {
			c.drop()
			nc = nil
		}
		if e.isStopped() {
			return c.fail(o, measure.ErrClosed)
		}
		continue hops
	}
	o.end = time.Now()
	if o.end.Sub(t0) > e.plan.Timeout {
		// Read in time by the kernel but ended late for us (a starved
		// goroutine): still a timeout, never a success above it.
		return c.fail(o, measure.ErrTimeout)
	}
	if c.resp.Status >= measure.MaxStatus {
		return c.fail(o, measure.ErrProtocol)
	}
	o.status = c.resp.Status
	if o.hops == 0 {
		o.size = sizes{wire: c.resp.WireBytes, header: c.resp.HeaderBytes, body: c.resp.BodyBytes, fields: c.resp.HeaderBytes, enc: c.resp.Encoding}
	} else {
		o.size.add(&c.resp)
		o.size.enc = c.resp.Encoding
	}
	o.ttfb = c.resp.First.Sub(tw)
	c.idleSince = o.end
	if c.resp.Close || e.plan.NoKeepAlive {
		c.drop()
		c.dropped = c.resp.Close && !e.plan.NoKeepAlive
	}
	return o
}

// readBufSize is an HTTP/1.1 connection's read buffer: lines up to it are
// parsed in place (http1.ReadResponse).
const readBufSize = 16 << 10

// readers holds the read buffers of TLS connections between responses.
// A sync.Pool (per-P caches, no shared lock per request) rather than a
// worker's own list: a buffer is held only from a response's first byte to
// its last, so about one per running goroutine is in use at any time,
// however many connections wait. Buffers not taken again are freed at the
// garbage collections after.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}

// leadReader is an HTTP/1.1 connection's reader under its bufio.Reader:
// the byte a TLS connection's response was awaited with (n = 1, and
// err if the same read failed after it), then the connection.
type leadReader struct {
	nc  net.Conn
	b   [1]byte
	n   int
	err error
}

func (l *leadReader) Read(p []byte) (int, error) {
	if l.n == 0 {
		return l.nc.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0], l.n = l.b[0], 0
	if err := l.err; err != nil {
		l.err = nil
		return 1, err
	}
	// The rest of the record the byte came from is in crypto/tls's own
	// buffer already: one more copy, no system call. A response is longer
	// than one byte, so waiting here for more (a record of one byte) is
	// what reading it needs anyway.
	m, err := l.nc.Read(p[1:])
	return 1 + m, err
}

// readResponse reads the response to the request just written. Over TLS
// it first waits for the response's first byte with a 1-byte read, then
// takes a read buffer from readers for the rest and gives it back once
// the response is read whole and nothing beyond it is buffered (a
// connection that failed is dropped: its buffer goes back too). Waiting
// with the byte costs one more crypto/tls Read, from the record already
// decrypted (BenchmarkKeepAliveRequest); in clear text the same wait would
// cost a read(2) per request, so a clear-text connection keeps its own
// buffer (16 KiB).
func (c *conn) readResponse(head bool, started *bool) error {
	if c.br == nil {
		n, err := c.lead.nc.Read(c.lead.b[:])
		if n == 0 {
			if err == nil {
				err = io.ErrNoProgress
			}
			return err
		}
		c.lead.n, c.lead.err = n, err
		c.br = readers.Get().(*bufio.Reader)
		c.br.Reset(&c.lead)
	}
	err := http1.ReadResponse(c.br, head, &c.resp, started)
	if c.tls && (err != nil || c.br.Buffered() == 0) {
		c.releaseReader()
	}
	return err
}

// releaseReader gives a TLS connection's read buffer back to readers.
func (c *conn) releaseReader() {
	if c.br == nil {
		return
	}
	c.br.Reset(nil)
	readers.Put(c.br)
	c.br = nil
	c.lead.n, c.lead.err = 0, nil
}

// resend reports whether a request that failed with kind before any
// response byte is sent once more on a new connection, and if so drops the
// old one and marks the outcome retried. Only a request on a connection it
// did not open itself that had been idle for at least ResendIdle (fresh
// false: a kept-alive or prepared connection, waiting) and that met the
// peer's close (end of file, EPIPE) or reset is resent, once: the server
// closed that connection before reading it (an idle timeout racing the
// write), so it never processed it, as with HTTP/2 streams above a
// GOAWAY's last stream ID. A busy connection the server resets or closes
// under a request is that request's error (field case C07). Never after the engine stopped, and never
// with no keep-alive: there every request has a connection of its own
// (prepared ahead only to take the handshake off the clock), so a server
// that closes it unanswered is counted as it is, as ab counts it (field
// case C11).
func (c *conn) resend(o *outcome, fresh bool, kind measure.ErrorKind) bool {
	if fresh || o.retried || c.e.plan.NoKeepAlive || (kind != measure.ErrClosed && kind != measure.ErrReset) || c.e.isStopped() {
		return false
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return false
	}
	c.drop()
	c.dropped = true
	o.retried = true
	return true
}

// fail abandons the connection after a failed request.
func (c *conn) fail(o outcome, kind measure.ErrorKind) outcome {
	c.drop()
	c.dropped = true
	if o.end.IsZero() {
		o.end = time.Now()
	}
	o.failed, o.kind = true, kind
	return o
}

// maxTime returns the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
