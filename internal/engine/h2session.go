package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/phalanxload/phalanx/internal/measure"
)

// The HTTP/2 connection (h2session): one TLS connection with its framer,
// its reader and flusher goroutines, flow control, SETTINGS, GOAWAY and
// the streams open on it. The slot that owns it, and reopens it, is h2conn
// (h2.go).

// h2WrapConn wraps a session's connection under its buffered reader and
// writer: the identity, except in tests (h2count_test.go counts reads and
// writes per request for the benchmarks).
var h2WrapConn = func(c net.Conn) net.Conn { return c }

// h2session is one HTTP/2 connection.
type h2session struct {
	c   *h2conn
	nc  net.Conn
	bw  *bufio.Writer
	fr  *http2.Framer
	wmu sync.Mutex // serializes frame writes
	// flushes wakes the session's flusher (buffered 1): requests' frames
	// wait in bw for it, so streams that send together share a write(2).
	flushes chan struct{}
	done    chan struct{} // closed by fail: stops the flusher
	// drained asks the flusher (buffered 1) to close the session: a
	// session drained after GOAWAY is closed by its own goroutine, not by
	// one started for it under s.mu.
	drained chan struct{}
	// wg joins the session's goroutines (readLoop, flusher, and in open
	// loop runPacer); running counts those not yet returned. The slot owns the session (track,
	// closeAll).
	wg      sync.WaitGroup
	running atomic.Int32
	// written is the highest stream ID whose HEADERS are in bw (guarded by
	// wmu); flushed the highest one written to the connection. A stream
	// above a GOAWAY's last stream ID that never left bw was never sent:
	// it is sent again without counting as a retry.
	written uint32
	flushed atomic.Uint32
	hpack   *h2Encoder // request header blocks (guarded by wmu)
	// wdl is the write deadline last set on nc (guarded by wmu; see
	// setWriteDeadline).
	wdl time.Time
	// hpackTable is the peer's SETTINGS_HEADER_TABLE_SIZE (guarded by
	// wmu; default 4,096, RFC 9113 section 6.5.2).
	hpackTable uint32

	// Response header blocks, decoded by the read loop alone (no lock):
	// hdec decodes every block, also of streams given up on (the dynamic
	// table needs them all), and hfield takes each of its fields; hbuf
	// holds a block's fragments until its last (CONTINUATION frames);
	// hstatus is the :status of the block being read, hbytes its frames'
	// wire bytes and hend its END_STREAM while CONTINUATION frames
	// follow. Decoding ourselves instead of the Framer's ReadMetaHeaders
	// skips building and validating a field list per response: only
	// :status is kept.
	hdec    *hpackDecoder
	hfield  func(name, value string)
	hbuf    []byte
	hstatus string
	// hloc is the block's Location, kept only with plan.MaxRedirects > 0
	// (redirect.go).
	hloc   string
	hbytes int64
	hend   bool
	// henc is the Content-Encoding of the block being read, hblock its
	// HPACK bytes (the frames' payloads, as h2load counts headers) and
	// hfields its fields' name and value bytes.
	henc    measure.Encoding
	hblock  int64
	hfields int64
	// readAt is when the read that completed the frame being handled
	// returned (read loop alone; see stampReader): the arrival time of
	// its response's first byte and end.
	readAt time.Time
	// chains are the chainable streams the frame being handled completed,
	// for runChains (read loop alone; h2chain.go).
	chains []*h2stream
	// pacer holds the open-loop slots waiting for their tickets
	// (h2pacer.go), guarded by pmu; its goroutine runs only in open loop.
	pmu   sync.Mutex
	pacer h2pacer

	mu          sync.Mutex // guards everything below
	cond        *sync.Cond
	streams     map[uint32]*h2stream
	nextID      uint32
	active      int
	limit       int // effective concurrent streams
	goaway      bool
	dead        bool
	err         error
	peerWindow  int32 // peer's initial stream window (for request bodies)
	sendWindow  int64 // connection send window
	maxFrame    uint32
	connUnacked uint32
}

// h2stream is one request's stream.
type h2stream struct {
	id uint32
	// done gets one value when the stream ends (endStreamLocked); it is
	// the stream slot's own channel (h2watch.done, buffered 1), reused by
	// its every stream: the slot receives exactly once per stream.
	done       chan struct{}
	status     int
	size       sizes     // its response's bytes, Content-Encoding
	first      time.Time // when the final HEADERS arrived (s.readAt)
	end        time.Time // when the response's last frame arrived (s.readAt)
	gotHeaders bool
	location   string // the final response's Location (plan.MaxRedirects > 0)
	err        error
	kind       measure.ErrorKind
	sendWindow int64
	unacked    uint32
	// ended is set when the stream completed (endStreamLocked), peerReset
	// when the server ended it with RST_STREAM (guarded by s.mu): a body
	// still being sent stops, and a stream the server reset gets no
	// RST_STREAM back (RFC 9113 section 5.4.2).
	ended     bool
	peerReset bool
	// sentAt is when the request was sent, from which its time to first
	// byte runs: when a chainable stream was opened, right before its
	// HEADERS were written; after the HEADERS (and body) of others.
	sentAt time.Time
	// chain is the stream's slot when the read loop may continue it on a
	// complete response (h2chain.go); nil: the slot's goroutine takes
	// every end.
	chain *h2slot
}

// newSession dials, checks ALPN h2 (over TLS; on an http:// target it
// speaks h2c with prior knowledge, RFC 9113 section 3.3, as h2load does:
// the preface goes first on the TCP connection, with no Upgrade) and
// exchanges the connection preface.
func (c *h2conn) newSession(ctx context.Context, reconnect bool) (*h2session, *connInfo, *dialError) {
	nc, tc, ci, derr := dialConn(ctx, c.e, c.w, reconnect)
	if derr != nil {
		return nil, nil, derr
	}
	if tc != nil && tc.ConnectionState().NegotiatedProtocol != "h2" {
		nc.Close()
		return nil, nil, &dialError{measure.ErrProtocol, fmt.Errorf("http2: %s did not negotiate h2 with ALPN", c.e.addr)}
	}
	s := &h2session{
		c: c, nc: nc, bw: bufio.NewWriterSize(h2WrapConn(nc), 32<<10), streams: map[uint32]*h2stream{}, nextID: 1,
		limit: int(c.e.maxStreams.Load()), peerWindow: 65535, sendWindow: 65535, maxFrame: 16384,
		flushes: make(chan struct{}, 1), done: make(chan struct{}), drained: make(chan struct{}, 1),
		hpack: newH2Encoder(len(c.e.entries)), hpackTable: 4096,
	}
	s.cond = sync.NewCond(&s.mu)
	s.fr = http2.NewFramer(s.bw, bufio.NewReaderSize(stampReader{h2WrapConn(nc), &s.readAt}, 32<<10))
	s.hfield = func(name, value string) {
		s.hfields += int64(len(name) + len(value))
		switch name {
		case ":status":
			s.hstatus = value
		case "content-encoding":
			s.henc = measure.EncodingOf(value)
		}
	}
	if c.e.plan.MaxRedirects > 0 { // redirect.go: Location looked at only then
		plain := s.hfield
		s.hfield = func(name, value string) {
			if name == "location" {
				s.hloc = value
			}
			plain(name, value)
		}
	}
	s.hdec = newHPACKDecoder(4096) // SETTINGS_HEADER_TABLE_SIZE: we send none, so RFC 9113's default
	s.fr.SetMaxReadFrameSize(1 << 20)
	// One DATA frame value reused (handle keeps nothing of a frame past
	// the next ReadFrame): no allocation per DATA frame.
	s.fr.SetReuseFrames()
	_ = nc.SetDeadline(time.Now().Add(c.e.plan.Timeout))
	_, err := s.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = s.fr.WriteSettings(
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2StreamWindow},
			http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20},
		)
	}
	if err == nil {
		err = s.fr.WriteWindowUpdate(0, h2ConnWindow-65535)
	}
	if err == nil {
		err = s.bw.Flush()
	}
	_ = nc.SetDeadline(time.Time{})
	if err != nil {
		nc.Close()
		return nil, nil, &dialError{classify(err, false), fmt.Errorf("http2 preface to %s: %w", c.e.addr, err)}
	}
	n := int32(2)
	if c.openChain() {
		n = 3
		s.pacer.wake = make(chan struct{}, 1)
	}
	s.running.Store(n)
	s.wg.Add(int(n))
	if n == 3 {
		go func() {
			defer s.wg.Done()
			defer s.running.Add(-1)
			s.runPacer()
		}()
	}
	go func() {
		defer s.wg.Done()
		defer s.running.Add(-1)
		s.readLoop()
	}()
	go func() {
		defer s.wg.Done()
		defer s.running.Add(-1)
		s.flusher()
	}()
	c.track(s)
	return s, ci, nil
}

// flusher writes out the frames requests leave in bw. Woken by a request,
// it first yields (runtime.Gosched), so that the other streams made ready
// by the same response batch or timer tick write their frames too, then
// flushes them all with one write(2), as h2load writes a connection's
// frames once per event-loop turn (the cost of a write per request is in
// bench/README.md, "Measured design choices").
func (s *h2session) flusher() {
	for {
		select {
		case <-s.flushes:
		case <-s.drained:
			s.close(nil)
			return
		case <-s.done:
			return
		}
		runtime.Gosched()
		s.wmu.Lock()
		var err error
		if s.bw.Buffered() > 0 {
			s.freshWriteDeadline()
			if err = s.bw.Flush(); err == nil {
				s.flushed.Store(s.written)
			}
		}
		s.wmu.Unlock()
		if err != nil {
			s.failKind(err, classify(err, false), true)
			return
		}
	}
}

// flushLast writes out the frames still in bw (the RST_STREAM of a
// stream that ended last) before the slot closes the session, with a short
// deadline: nothing else writes any more.
func (s *h2session) flushLast() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.bw.Buffered() == 0 || !s.usable() {
		return
	}
	s.setWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_ = s.bw.Flush()
}

// usable reports whether new streams may start on s.
func (s *h2session) usable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.dead && !s.goaway
}

// close ends the session, failing open streams with err (nil: closed).
func (s *h2session) close(err error) {
	s.fail(err, true)
}

// closeAndJoin closes the session and waits for its goroutines. Never
// called from them.
func (s *h2session) closeAndJoin() {
	s.close(net.ErrClosed)
	s.wg.Wait()
}

// drain asks the flusher to close the session, which nothing will use
// again (drained after GOAWAY). Safe with s.mu held.
func (s *h2session) drain() {
	select {
	case s.drained <- struct{}{}:
	default:
	}
}

// fail marks the session dead and ends every open stream: closed, or
// truncated when its response had begun.
func (s *h2session) fail(err error, closeConn bool) { s.failKind(err, measure.ErrClosed, closeConn) }

// failKind is fail with the kind of error for streams whose response had
// not begun (a failed write: the request may not have been sent).
func (s *h2session) failKind(err error, unanswered measure.ErrorKind, closeConn bool) {
	if err == nil {
		err = errH2Closed
	}
	s.mu.Lock()
	if !s.dead {
		s.dead = true
		s.err = err
		close(s.done)
		for id, st := range s.streams {
			kind := unanswered
			if st.gotHeaders {
				kind = measure.ErrTruncated
			}
			s.endStreamLocked(id, st, err, kind)
		}
		s.cond.Broadcast()
	}
	s.mu.Unlock()
	if closeConn {
		s.nc.Close()
	}
}

// endStreamLocked completes a stream and reports whether it did (false:
// it had already ended), waking its slot's goroutine. Called with s.mu
// held.
func (s *h2session) endStreamLocked(id uint32, st *h2stream, err error, kind measure.ErrorKind) bool {
	if !s.removeLocked(id, st, err, kind) {
		return false
	}
	select {
	case st.done <- struct{}{}: // the slot's receive takes it
	default: // never: one end per stream, each received (but never block under s.mu)
	}
	return true
}

// removeLocked is endStreamLocked without waking the slot's goroutine.
func (s *h2session) removeLocked(id uint32, st *h2stream, err error, kind measure.ErrorKind) bool {
	if _, ok := s.streams[id]; !ok {
		return false
	}
	delete(s.streams, id)
	st.err, st.kind, st.ended = err, kind, true
	s.active--
	s.cond.Broadcast()
	if s.goaway && s.active == 0 && !s.dead {
		// Drained after GOAWAY: nothing more will use this connection.
		s.drain()
	}
	return true
}

// h2result is a round trip's result (roundTrip).
type h2result struct {
	status int
	size   sizes
	ttfb   time.Duration
	end    time.Time
	kind   measure.ErrorKind
	err    error
	loc    string // the final response's Location (plan.MaxRedirects > 0)
	// back is what the slot was handed back with (h2chain.go): with
	// backStream the result is the slot's current stream's, the one sent
	// here or, chained, the last one the read loop sent for the slot;
	// otherwise the read loop settled the request, and the result is empty.
	back    h2back
	chained bool
}

// roundTrip sends slot sl's request on a new stream and waits for its
// end or the deadline, which the slot's watch watches.
//
// A completed response's end is when its last frame arrived (the read that
// carried it returned, stampReader), not when this slot woke to take it.
func (s *h2session) roundTrip(sl *h2slot) (r h2result) {
	en, deadline, wt := sl.en, sl.deadline, sl.wt
	s.mu.Lock()
	for !s.dead && !s.goaway && s.active >= s.limit {
		s.cond.Wait()
	}
	if s.dead || s.goaway {
		s.mu.Unlock()
		r.err = errH2NotSent
		return r
	}
	s.active++ // the slot is ours; the stream ID comes with the write lock
	s.mu.Unlock()

	// Stream IDs must open in increasing order (RFC 9113 section 5.1.1):
	// assign the ID under the write lock, right before the HEADERS.
	s.wmu.Lock()
	s.mu.Lock()
	if s.dead || s.goaway {
		// A GOAWAY arrived while this slot waited for the write lock: the
		// stream would be above its last stream ID.
		s.active--
		s.cond.Broadcast()
		drained := s.goaway && s.active == 0 && !s.dead
		s.mu.Unlock()
		s.wmu.Unlock()
		if drained {
			s.drain()
		}
		r.err = errH2NotSent
		return r
	}
	st := s.openLocked(sl, time.Now())
	s.mu.Unlock()
	block := s.hpack.block(en)
	if len(en.body) > 0 || s.bw.Available() < 9+len(block) {
		// The frames may reach the connection now, not only bw: they
		// go with this stream's deadline. A HEADERS frame that fits in
		// bw waits there for the flusher, which sets its own.
		s.setWriteDeadline(deadline)
	}
	err := s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: block, EndStream: len(en.body) == 0, EndHeaders: true})
	s.written = st.id
	if err == nil && len(en.body) > 0 {
		switch err = s.writeBody(st, en.body, deadline); {
		case errors.Is(err, errBodyStopped):
			// The stream ended before its body was all sent: the server
			// answered early (RFC 9113 section 8.1; the response counts).
			// It reset the stream itself, or we cancel what is left.
			err = nil
			if !st.peerReset {
				err = s.fr.WriteRSTStream(st.id, http2.ErrCodeCancel)
			}
		case errors.Is(err, errTimeout):
			// The body waited for flow-control window past the deadline
			// (writeBody ended the stream as a timeout): reset only this
			// stream; the connection and its other streams go on. The
			// write gets a fresh deadline: ours has passed (see write).
			s.freshWriteDeadline()
			err = s.fr.WriteRSTStream(st.id, http2.ErrCodeCancel)
		}
	}
	s.wmu.Unlock()
	if err != nil {
		s.fail(err, true) // ends st, or it ended earlier by a GOAWAY that refused it
	} else {
		s.kick()
		if st.chain == nil {
			// Only this goroutine reads it (the read loop reads a
			// chainable stream's): from the body's end, as before chains.
			st.sentAt = time.Now()
		}
		wt.watch(s, st, deadline)
	}
	<-st.done // ended by the server, a failure, wt at the deadline, or handed back by a chain
	wt.clear()
	if sl.back != backStream {
		r.back = sl.back
		return r
	}
	cur := sl.cur
	r.chained = cur != st
	if err != nil && !r.chained && !errors.Is(st.err, errH2Refused) {
		r.kind, r.err = classify(err, false), err
		return r
	}
	st = cur
	if st.err != nil {
		r.size, r.kind, r.err = st.size, st.kind, st.err
		return r
	}
	// A response that came before the body was all written has its
	// first byte before sentAt: its time to first byte is 0.
	r.loc = st.location
	r.status, r.size, r.ttfb, r.end = st.status, st.size, max(st.first.Sub(st.sentAt), 0), st.end
	return r
}

// kick wakes the flusher: the frames waiting in bw go out with those of
// the other streams ready now. Safe with any lock held.
func (s *h2session) kick() {
	select {
	case s.flushes <- struct{}{}:
	default: // already woken: it will find these frames too
	}
}

// errTimeout ends a stream that did not complete within the plan's
// timeout (classify: measure.ErrTimeout).
var errTimeout = fmt.Errorf("http2: stream timed out: %w", os.ErrDeadlineExceeded)

// errBodyStopped is writeBody's report that the stream ended (a complete
// response, or the server's RST_STREAM) before its body was all sent.
var errBodyStopped = errors.New("http2: stream ended before its request body was sent")

// writeBody writes a request body within the peer's flow-control windows.
// Called with wmu held, which it releases while it waits for window. It
// stops with errBodyStopped when the stream ends first (the server
// answered before reading the whole body, RFC 9113 section 8.1), and with
// errTimeout, having ended the stream as a timeout, when the deadline
// passes while it waits; other errors are the connection's.
func (s *h2session) writeBody(st *h2stream, body []byte, deadline time.Time) error {
	var wake *time.Timer // the deadline's wake-up, armed on the first wait
	defer func() {
		if wake != nil {
			wake.Stop()
		}
	}()
	for len(body) > 0 {
		s.mu.Lock()
		for !s.dead && !st.ended && (s.sendWindow <= 0 || st.sendWindow <= 0) {
			if !time.Now().Before(deadline) {
				s.endStreamLocked(st.id, st, errTimeout, measure.ErrTimeout)
				s.mu.Unlock()
				return errTimeout
			}
			if wake == nil {
				wake = time.AfterFunc(time.Until(deadline), func() {
					s.mu.Lock()
					s.cond.Broadcast()
					s.mu.Unlock()
				})
			}
			// What is already written waits in bw: have the flusher send
			// it, or the server never sees the data it should open the
			// window for.
			s.kick()
			s.wmu.Unlock()
			s.cond.Wait()
			s.mu.Unlock()
			s.wmu.Lock()
			s.setWriteDeadline(deadline) // others' writes set theirs
			s.mu.Lock()
		}
		if s.dead {
			s.mu.Unlock()
			return s.err
		}
		if st.ended {
			s.mu.Unlock()
			return errBodyStopped
		}
		n := min(int64(len(body)), s.sendWindow, st.sendWindow, int64(s.maxFrame))
		s.sendWindow -= n
		st.sendWindow -= n
		s.mu.Unlock()
		if err := s.fr.WriteData(st.id, int(n) == len(body), body[:n]); err != nil {
			return err
		}
		body = body[n:]
	}
	return nil
}

// readLoop reads frames until the connection fails or closes.
func (s *h2session) readLoop() {
	for {
		f, err := s.fr.ReadFrame()
		if err != nil {
			s.fail(err, true)
			return
		}
		err = s.handle(f)
		if len(s.chains) > 0 {
			s.runChains()
		}
		if err != nil {
			s.fail(err, true)
			return
		}
	}
}

// handle processes one frame from the server.
func (s *h2session) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		s.mu.Lock()
		table, hasTable := uint32(0), false
		err := f.ForeachSetting(func(set http2.Setting) error {
			switch set.ID {
			case http2.SettingHeaderTableSize:
				table, hasTable = set.Val, true
			case http2.SettingMaxConcurrentStreams:
				s.limit = min(int(s.c.e.maxStreams.Load()), int(set.Val))
				s.c.e.noteMaxStreams(s.limit)
			case http2.SettingInitialWindowSize:
				delta := int64(set.Val) - int64(s.peerWindow)
				s.peerWindow = int32(set.Val)
				for _, st := range s.streams {
					st.sendWindow += delta
				}
			case http2.SettingMaxFrameSize:
				s.maxFrame = set.Val
			}
			return nil
		})
		s.cond.Broadcast()
		s.mu.Unlock()
		if err != nil {
			return err
		}
		return s.write(func() error {
			if hasTable && table != s.hpackTable {
				// Blocks after the ACK start with the size update.
				s.hpackTable = table
				s.hpack.setTableSize(table)
			}
			return s.fr.WriteSettingsAck()
		})
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return s.write(func() error { return s.fr.WritePing(true, f.Data) })
	case *http2.GoAwayFrame:
		s.mu.Lock()
		s.goaway = true
		flushed := s.flushed.Load()
		for id, st := range s.streams {
			if id > f.LastStreamID {
				err := errH2Refused // sent, never processed: a retry
				if id > flushed {
					err = errH2NotSent // still in our buffer: never sent
				}
				s.endStreamLocked(id, st, err, measure.ErrRefused)
			}
		}
		if s.active == 0 && !s.dead {
			s.drain()
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		s.c.sessionLost(s)
	case *http2.WindowUpdateFrame:
		s.mu.Lock()
		if f.StreamID == 0 {
			s.sendWindow += int64(f.Increment)
		} else if st := s.streams[f.StreamID]; st != nil {
			st.sendWindow += int64(f.Increment)
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	case *http2.HeadersFrame:
		s.hstatus, s.hbytes, s.hend, s.henc, s.hblock, s.hfields, s.hloc = "", 0, f.StreamEnded(), measure.EncIdentity, 0, 0, ""
		return s.headerFragment(f.StreamID, f.Length, f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.ContinuationFrame: // the Framer checks that it follows its HEADERS
		return s.headerFragment(f.StreamID, f.Length, f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.DataFrame:
		n := uint32(f.Length)
		s.mu.Lock()
		st := s.streams[f.StreamID]
		var streamUpdate uint32
		if st != nil {
			st.size.wire += int64(9 + n)
			st.size.body += int64(len(f.Data())) // padding is framing
			st.unacked += n
			if st.unacked >= h2UpdateAt && !f.StreamEnded() {
				streamUpdate, st.unacked = st.unacked, 0
			}
			if f.StreamEnded() {
				st.end = s.readAt
				s.completeLocked(f.StreamID, st)
			}
		}
		s.connUnacked += n
		connUpdate := uint32(0)
		if s.connUnacked >= h2UpdateAt {
			connUpdate, s.connUnacked = s.connUnacked, 0
		}
		s.mu.Unlock()
		if connUpdate > 0 || streamUpdate > 0 {
			return s.write(func() error {
				if connUpdate > 0 {
					if err := s.fr.WriteWindowUpdate(0, connUpdate); err != nil {
						return err
					}
				}
				if streamUpdate > 0 {
					return s.fr.WriteWindowUpdate(f.StreamID, streamUpdate)
				}
				return nil
			})
		}
	case *http2.RSTStreamFrame:
		s.mu.Lock()
		if st := s.streams[f.StreamID]; st != nil {
			st.peerReset = true
			if f.ErrCode == http2.ErrCodeRefusedStream {
				s.endStreamLocked(f.StreamID, st, errH2Refused, measure.ErrRefused)
			} else {
				s.endStreamLocked(f.StreamID, st, fmt.Errorf("http2: stream reset by server: %v", f.ErrCode), measure.ErrReset)
			}
		}
		s.mu.Unlock()
	case *http2.PushPromiseFrame:
		return &protocolError{Msg: "push promise although push is disabled"}
	}
	return nil
}

// headerFragment decodes one fragment of a response header block (RFC
// 9113 section 4.3: HEADERS, then CONTINUATION until END_HEADERS) and,
// at the block's end, takes its :status and END_STREAM to the stream.
// Errors: the block does not decode (a connection error,
// COMPRESSION_ERROR).
func (s *h2session) headerFragment(id, length uint32, frag []byte, last bool) error {
	s.hbytes += int64(9 + length)
	s.hblock += int64(len(frag))
	if !last || len(s.hbuf) > 0 {
		if len(s.hbuf)+len(frag) > h2MaxHeaderBlock {
			return http2.ConnectionError(http2.ErrCodeCompression)
		}
		s.hbuf = append(s.hbuf, frag...) // the Framer reuses frag's buffer
		if !last {
			return nil
		}
		frag = s.hbuf
		s.hbuf = s.hbuf[:0]
	}
	if err := s.hdec.decode(frag, s.hfield); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[id]
	if st == nil {
		return nil // a stream we gave up on (timeout)
	}
	st.size.wire += s.hbytes
	st.size.header += s.hblock
	st.size.fields += s.hfields
	if !st.gotHeaders {
		code, err := strconv.Atoi(s.hstatus)
		if err != nil || code < 100 || code >= measure.MaxStatus {
			s.endStreamLocked(id, st, &protocolError{Msg: "bad :status"}, measure.ErrProtocol)
			return nil
		}
		if code < 200 {
			return nil // interim response: the final one follows
		}
		st.status, st.gotHeaders, st.first, st.size.enc, st.location = code, true, s.readAt, s.henc, s.hloc
	}
	if s.hend {
		st.end = s.readAt
		s.completeLocked(id, st)
	}
	return nil
}

// write runs one frame write under the write lock and flushes.
//
// The write gets a fresh deadline: the last one set may be a timed-out
// stream's, already past, and a failed write would make crypto/tls refuse
// every later write on the connection.
func (s *h2session) write(f func() error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.freshWriteDeadline()
	if err := f(); err != nil {
		return err
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	s.flushed.Store(s.written)
	return nil
}

// setWriteDeadline sets nc's write deadline to t and notes it. Called
// with wmu held.
func (s *h2session) setWriteDeadline(t time.Time) {
	_ = s.nc.SetWriteDeadline(t)
	s.wdl = t
}

// freshWriteDeadline gives the next write between 7/8 of the plan's
// timeout and the whole timeout from now: the deadline last set is kept
// while at least 7/8 of the timeout is left of it, so a busy session
// re-arms the connection's write timer (a runtime timer under a lock)
// about once per eighth of the timeout instead of once per flush. Called
// with wmu held.
func (s *h2session) freshWriteDeadline() {
	now := time.Now()
	t := s.c.e.plan.Timeout
	if s.wdl.Sub(now) >= t-t/8 {
		return
	}
	s.setWriteDeadline(now.Add(t))
}

// stampReader notes in *at when each read from the connection returns:
// every frame the read completed is stamped with it. One clock read per
// read(2)-sized batch of frames instead of one per response; a response
// so gets the instant its bytes reached the client, before the frames
// ahead of it in the batch were parsed.
type stampReader struct {
	r  io.Reader
	at *time.Time
}

func (r stampReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	*r.at = time.Now()
	return n, err
}
