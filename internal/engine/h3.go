package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// HTTP/3 client (plan.H3) on quic-go: each connection slot keeps one QUIC
// connection (RFC 9000, version 1) on a UDP socket of its own, with TLS 1.3
// inside QUIC (RFC 9001) and ALPN h3, and sends requests on it from
// MaxStreams stream slots at once (h3mux.go; one, as an HTTP/1.1 slot does
// on its TCP connection, by default and with a connection rate): closed
// loop, open loop with growth, a connection per ticket with a connection
// rate. The HTTP/3 framing and QPACK are quic-go's http3 package (a
// ClientConn per connection, safe for concurrent streams, one request
// stream per request). quic-go's own goroutines
// (the connection's run loop, the transport's reader, the control and
// QPACK streams' readers) are its: they exit when the slot closes the
// connection and its transport.

// h3Shared is what every HTTP/3 slot of an engine uses: the address dialled
// as UDP and the QUIC and HTTP/3 configurations.
type h3Shared struct {
	raddr *net.UDPAddr
	udp   string // "udp4" or "udp6": the family of raddr
	quic  quic.Config
	// client makes each connection's http3.ClientConn: compression off,
	// so that bodies are counted as received and only the plan's
	// Accept-Encoding is sent.
	client http3.Transport
}

// newH3Shared returns the HTTP/3 configuration for the resolved address
// addr (host:port, an IP literal).
func newH3Shared(addr string, timeout time.Duration) (*h3Shared, error) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("http3: address %s: %w", addr, err)
	}
	s := &h3Shared{raddr: raddr, udp: "udp6", client: http3.Transport{DisableCompression: true}}
	if raddr.IP.To4() != nil {
		s.udp = "udp4"
	}
	s.quic = quic.Config{
		// The server must not open request streams (RFC 9114 section 6.1).
		MaxIncomingStreams: -1,
		// The handshake is bounded by the plan's timeout (dialH3's
		// context); quic-go's idle default (30 s) ends a connection that
		// waits longer (a stage that ramps it later): its next request
		// reconnects, counted.
		HandshakeIdleTimeout: timeout,
	}
	return s, nil
}

// h3session is one HTTP/3 connection: its UDP socket, QUIC transport and
// connection, and the HTTP/3 client connection over it.
type h3session struct {
	udp *net.UDPConn
	tr  *quic.Transport
	qc  *quic.Conn
	cc  *http3.ClientConn
	// streams counts the slot's requests using the session, retired
	// that it takes no new one (both guarded by its slot's mu; h3mux.go).
	streams int
	retired bool
	once    sync.Once // close's

	// A connection dialled in 0-RTT (plan TLS.EarlyData) returns before
	// its handshake completes: watch closes handshook when it completes
	// (handshakeAt set, ok true) or the connection ends first.
	handshook   chan struct{}
	handshakeAt time.Time
	ok          bool
}

// close closes the connection with H3_NO_ERROR (RFC 9114 section 8.1), its
// transport (joining its reader) and its socket, and joins watch; later
// calls do nothing.
func (s *h3session) close() {
	s.once.Do(func() {
		_ = s.qc.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
		_ = s.tr.Close()
		_ = s.udp.Close()
		if s.handshook != nil {
			<-s.handshook
		}
	})
}

// usable reports whether the connection is still open.
func (s *h3session) usable() bool { return s.qc.Context().Err() == nil }

// watch waits for a 0-RTT connection's handshake to complete, or the
// connection to end, and closes s.handshook.
func (s *h3session) watch() {
	defer close(s.handshook)
	select {
	case <-s.qc.HandshakeComplete():
	case <-s.qc.Context().Done():
	}
	// Both may be ready (a connection closed right after its handshake):
	// a completed handshake counts.
	select {
	case <-s.qc.HandshakeComplete():
		s.handshakeAt, s.ok = time.Now(), true
	default:
	}
}

// finish fills ci, the connection's, once its 0-RTT handshake is over
// (waiting for it): the handshake time from t0 to its completion, the TLS
// state, and whether the server accepted 0-RTT. A handshake that never
// completed leaves ci a connection without one, its 0-RTT offered and not
// accepted (quic-go's HTTP/3 client closes a connection whose control
// stream it opens after a rejection).
func (s *h3session) finish(ci *connInfo, t0 time.Time) {
	<-s.handshook
	if s.ok {
		handshakeDone(ci, s.qc, t0, s.handshakeAt)
	}
}

// handshakeDone fills ci from qc's completed handshake: its time from t0
// to done, the TLS state, the QUIC version, and whether the server
// accepted 0-RTT.
func handshakeDone(ci *connInfo, qc *quic.Conn, t0, done time.Time) {
	ci.done, ci.handshake = done, micros(done.Sub(t0))
	st := qc.ConnectionState()
	describeTLS(ci, st.TLS)
	ci.transport = "QUIC " + st.Version.String()
	ci.earlyAccepted = st.Used0RTT
}

// h3conn is one HTTP/3 connection slot.
type h3conn struct {
	e     *Engine
	w     *worker
	j     int          // index within the worker (stage targets activate slots in order)
	pos   atomic.Int64 // next position in e.sched, shared by the slot's streams (outside count mode: countEntry)
	alarm *alarm       // the loop goroutine's

	// mu guards what follows against close() and the slot's other
	// stream slots (h3mux.go); cond signals a dial's end.
	mu      sync.Mutex
	cond    *sync.Cond
	cur     *h3session
	closed  bool
	dialing bool
	dropped bool // the last connection was lost: the next open is a reconnect
	// retired are sessions out of use (lost, or left for a retry) whose
	// streams are still open: the last one's release closes them.
	retired []*h3session

	tally tally

	buf []byte // the loop goroutine's: response bodies are read into it and dropped
}

func newH3Conn(e *Engine, w *worker, i, j int) *h3conn {
	c := &h3conn{e: e, w: w, j: j, alarm: newAlarm()}
	c.pos.Store(int64(i % len(e.sched)))
	c.cond = sync.NewCond(&c.mu)
	return c
}

var _ rateConn = (*h3conn)(nil)

func (c *h3conn) worker() *worker  { return c.w }
func (c *h3conn) accounts() *tally { return &c.tally }

// h3SilentSlack: a QUIC handshake is bounded by the plan's timeout plus
// its 1/h3SilentSlack, so that quic-go's handshake idle timeout (the plan's
// timeout with no packet received) fires first when the server never
// answers: that is a connect error, as TCP's refused connection (an
// unconnected UDP socket does not see ICMP port unreachable).
const h3SilentSlack = 4

// dialH3 opens a QUIC connection to the engine's address from a socket of
// its own (bound to w's next source address, if any) and completes its
// handshake (1-RTT, or resumed with a session from w's cache), bounded by
// the plan's timeout and its 1/h3SilentSlack (a timeout error), or by
// quic-go's handshake idle timeout when nothing came from the server (a
// connect error). The handshake time runs from the socket's creation
// to the handshake's end: QUIC has no connect before it, so connInfo's
// connect is not recorded.
//
// With early and the plan's TLS.EarlyData, a handshake that offers a
// session the server issued for 0-RTT returns as soon as 0-RTT keys are
// ready (quic.Transport.DialEarly), before the handshake completes: the
// session's handshook is then set, and ci is filled by finish. t0 is the
// handshake's start.
func dialH3(ctx context.Context, e *Engine, w *worker, reconnect, early bool) (_ *h3session, _ *connInfo, t0 time.Time, _ *dialError) {
	ctx, cancel := context.WithTimeout(ctx, e.plan.Timeout+e.plan.Timeout/h3SilentSlack)
	defer cancel()
	var laddr *net.UDPAddr
	if n := len(w.sources); n > 0 {
		src := w.sources[(w.source.Add(1)-1)%int64(n)].(*net.TCPAddr)
		laddr = &net.UDPAddr{IP: src.IP}
	}
	t0 = time.Now()
	udp, err := net.ListenUDP(e.h3.udp, laddr)
	if err != nil {
		kind := classifyDial(err, false)
		if kind == measure.ErrPorts {
			return nil, nil, t0, &dialError{kind, fmt.Errorf("quic socket for %s: %w: %s", e.addr, err, measure.PortsAdvice)}
		}
		return nil, nil, t0, &dialError{kind, fmt.Errorf("quic socket for %s: %w", e.addr, err)}
	}
	tr := &quic.Transport{Conn: udp}
	conf, oc := w.tlsConf, (*offerCache)(nil)
	if w.resume != nil {
		conf, oc = w.resume.next()
	}
	early = early && oc != nil && e.plan.TLS.EarlyData
	var qc *quic.Conn
	if early {
		qc, err = tr.DialEarly(ctx, e.h3.raddr, conf, &e.h3.quic)
	} else {
		qc, err = tr.Dial(ctx, e.h3.raddr, conf, &e.h3.quic)
	}
	if err != nil {
		_ = tr.Close()
		_ = udp.Close()
		var ite *quic.IdleTimeoutError
		switch {
		case ctx.Err() == context.DeadlineExceeded:
			return nil, nil, t0, &dialError{measure.ErrTimeout, fmt.Errorf("quic handshake with %s: %w", e.addr, err)}
		case errors.As(err, &ite):
			return nil, nil, t0, &dialError{measure.ErrConnect, fmt.Errorf("quic handshake with %s: no answer from the server in %s (nothing listening on UDP, or its packets dropped): %w", e.addr, e.plan.Timeout, err)}
		}
		return nil, nil, t0, &dialError{classifyH3(err, false, true), fmt.Errorf("quic handshake with %s: %w%s", e.addr, err, verifyHint(err, e.plan.TLS))}
	}
	s := &h3session{udp: udp, tr: tr, qc: qc, cc: e.h3.client.NewClientConn(qc)}
	ci := &connInfo{reconnect: reconnect, quic: true, transport: "QUIC " + quic.Version1.String()}
	ci.offered = oc != nil && oc.offered
	select {
	case <-qc.HandshakeComplete():
		handshakeDone(ci, qc, t0, time.Now())
		// A session offered for 0-RTT whose handshake completed before
		// DialEarly returned: its first request is counted as the server
		// counts it.
		ci.early = ci.earlyAccepted
	default: // in 0-RTT: finish fills ci
		ci.early = true
		s.handshook = make(chan struct{})
		go s.watch()
	}
	return s, ci, t0, nil
}

// dial opens a new connection and makes it current.
func (c *h3conn) dial(ctx context.Context, reconnect bool) (*connInfo, *dialError) {
	s, ci, _, derr := dialH3(ctx, c.e, c.w, reconnect, false)
	if derr != nil {
		return nil, derr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		s.close()
		return nil, &dialError{measure.ErrLocal, net.ErrClosed}
	}
	if c.cur != nil {
		c.cur.close()
	}
	c.cur = s
	return ci, nil
}

// do performs one request on a request stream of the slot's connection,
// from the loop goroutine's stream slot (rateConn; h3stream's for the
// others).
func (c *h3conn) do(t0 time.Time, en *entry) outcome { return c.doOn(&c.buf, t0, en) }

// doOn performs one request on a request stream of the slot's connection,
// opening a connection first when there is none (session: its handshake
// is then part of the latency, as over TCP), and follows its redirects
// (plan.MaxRedirects, redirect.go), each hop one more request stream on
// the slot's connection. The latency and the timeout run from t0, for the
// whole exchange. A request the server rejected unprocessed
// (H3_REQUEST_REJECTED, RFC 9114 section 4.1.1) is sent once more, as a
// retry, on a new connection (the rejecting one takes no new stream and
// closes when its last stream ends); a second rejection is ErrRefused.
// A request sent in 0-RTT (plan TLS.EarlyData) that the server rejected
// (quic.Err0RTTRejected: discarded unprocessed, RFC 9001 section 4.6.2) is
// sent once more on a new connection that does not try 0-RTT, not counted
// as a retry: quic-go offers Conn.NextConnection to go on on the rejected
// connection, but the HTTP/3 client connection on it lost its control
// stream, and a request resent there was reset by the server
// (H3_REQUEST_INCOMPLETE) in tests against quic-go's own server.
// buf is the calling stream slot's read buffer.
func (c *h3conn) doOn(buf *[]byte, t0 time.Time, en *entry) outcome {
	e := c.e
	o := outcome{start: t0, sent: t0, entry: en.idx}
	deadline := t0.Add(e.plan.Timeout)
	if c.w.open {
		o.sent = time.Now()
		if !o.sent.Before(deadline) {
			o.end, o.failed, o.kind = o.sent, true, measure.ErrTimeout
			return o
		}
	}
	var hopSizes sizes // the redirects' responses followed so far
	resent := false    // sent again after a 0-RTT rejection
	for {
		s, ci, hs, derr := c.session(!resent)
		if ci != nil {
			o.addConn(ci) // the exchange's first, a retry's or a hop's
			if s != nil && s.handshook != nil {
				// In 0-RTT: ci is complete once the handshake is.
				defer s.finish(ci, hs)
			}
		}
		if derr != nil {
			o.end, o.failed, o.kind = time.Now(), true, derr.kind
			return o
		}
		loc, kind, err := c.roundTrip(s, en, deadline, buf, &o)
		if err != nil && !resent && errors.Is(err, quic.Err0RTTRejected) && !e.isStopped() {
			// The server discarded the 0-RTT request unprocessed: send it
			// again on a new connection that does not try 0-RTT. The
			// rejected one takes no new stream but stays open until the
			// exchange ends, so that the server sees its handshake end
			// (closed at once, its Finished could follow the close).
			c.retire(s)
			defer c.release(s, false)
			resent = true
			continue
		}
		retry := err != nil && kind == measure.ErrRefused && !o.retried && !e.isStopped()
		// Without keep-alive, lost or left for a retry: no new stream on s.
		c.release(s, e.plan.NoKeepAlive || retry || (err != nil && !s.usable()))
		if retry {
			o.retried = true
			continue
		}
		if err != nil {
			o.end, o.failed, o.kind = time.Now(), true, kind
			return o
		}
		if o.end.After(deadline) {
			o.failed, o.kind = true, measure.ErrTimeout // never a success above the timeout
			return o
		}
		if loc != "" && e.plan.MaxRedirects > 0 && isRedirect(o.status) {
			// A redirect to follow: its bytes are the exchange's, its
			// next hop one more request stream.
			hopSizes.addSizes(o.size)
			next, ok := en.hop(e, o.status, []byte(loc), o.hops)
			if !ok {
				o.failed, o.kind = true, measure.ErrRedirect
				return o
			}
			if e.isStopped() {
				o.failed, o.kind = true, measure.ErrClosed
				return o
			}
			o.hops++
			en = next
			continue
		}
		if o.hops > 0 {
			hopSizes.addSizes(o.size)
			o.size = hopSizes
		}
		return o
	}
}

// roundTrip sends en on a new request stream of s and reads the response
// whole into *buf (allocated on first use), filling o's status, sizes,
// TTFB and end. The stream's deadline is the request's. loc is the
// response's Location, read only with plan.MaxRedirects > 0. Errors come
// with their kind (classifyH3).
func (c *h3conn) roundTrip(s *h3session, en *entry, deadline time.Time, buf *[]byte, o *outcome) (loc string, _ measure.ErrorKind, _ error) {
	ctx, cancel := context.WithDeadline(c.e.stopCtx, deadline)
	defer cancel()
	str, err := s.cc.OpenRequestStream(ctx)
	if err != nil {
		return "", classifyH3(err, false, false), err
	}
	_ = str.SetDeadline(deadline)
	if err := str.SendRequestHeader(en.h3); err != nil {
		str.CancelRead(quic.StreamErrorCode(http3.ErrCodeRequestCanceled))
		return "", classifyH3(err, false, false), err
	}
	// The request's body and its end (FIN). A server may answer before
	// reading them and stop the request stream with H3_NO_ERROR (RFC 9114
	// section 4.1): then the write or the close fails, and the response is
	// read all the same.
	if len(en.body) > 0 {
		if _, err := str.Write(en.body); err != nil && !stoppedNoError(err) {
			str.CancelRead(quic.StreamErrorCode(http3.ErrCodeRequestCanceled))
			return "", classifyH3(err, false, false), err
		}
	}
	_ = str.Close() // fails only on a stream already reset, which the read reports
	tw := time.Now()
	var resp *http.Response
	for range 6 { // interim responses (1xx) before the final one, at most 5 (quic-go's bound)
		if resp, err = str.ReadResponse(); err != nil {
			str.CancelRead(quic.StreamErrorCode(http3.ErrCodeRequestCanceled))
			return "", classifyH3(err, false, false), err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	first := time.Now()
	if *buf == nil {
		*buf = make([]byte, 32<<10)
	}
	var body int64
	for {
		n, err := resp.Body.Read(*buf)
		body += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			str.CancelRead(quic.StreamErrorCode(http3.ErrCodeRequestCanceled))
			return "", classifyH3(err, true, false), err
		}
	}
	o.end = time.Now()
	if resp.StatusCode >= measure.MaxStatus || resp.StatusCode < 200 {
		return "", measure.ErrProtocol, fmt.Errorf("http3: status %d", resp.StatusCode)
	}
	o.status = resp.StatusCode
	o.ttfb = first.Sub(tw)
	o.size = sizes{body: body, wire: body, fields: headerFieldBytes(resp.Header), enc: measure.EncodingOf(resp.Header.Get("Content-Encoding"))}
	if c.e.plan.MaxRedirects > 0 {
		loc = resp.Header.Get("Location")
	}
	return loc, 0, nil
}

// stoppedNoError reports whether err is the server's STOP_SENDING with
// H3_NO_ERROR: it answers without the rest of the request.
func stoppedNoError(err error) bool {
	var se *quic.StreamError
	return errors.As(err, &se) && se.Remote && http3.ErrCode(se.ErrorCode) == http3.ErrCodeNoError
}

// headerFieldBytes is the decoded size of a response's header fields: the
// lengths of their names and values (h2load's bytes_head_decomp, as the
// HTTP/2 client counts them), the status pseudo-field not included. The
// QPACK-encoded size is not visible through quic-go's http3 package, so
// HeaderBytes and the framing stay uncounted over HTTP/3.
func headerFieldBytes(h http.Header) int64 {
	var n int64
	for k, vv := range h {
		for _, v := range vv {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// buildH3Request returns the HTTP/3 request of entry r (its URL t): the
// plan's method, headers (a Host header becomes :authority) and a
// User-Agent unless the plan sets one. The body is written by roundTrip
// after the header section, without a Content-Length: over HTTP/3 the
// DATA frames and the stream's end delimit it (RFC 9114 section 4.1).
func buildH3Request(t plan.Target, r plan.Request) *http.Request {
	req := &http.Request{
		Method: r.Method,
		// Opaque is the :path exactly as the plan gives it (url.URL's
		// RequestURI returns it as is).
		URL:    &url.URL{Scheme: "https", Host: t.HostHeader, Opaque: t.RequestURI},
		Host:   t.HostHeader,
		Header: http.Header{},
	}
	for _, h := range r.Headers {
		if equalFold(h.Name, "host") {
			req.Host = h.Value
			continue
		}
		req.Header[http.CanonicalHeaderKey(h.Name)] = append(req.Header[http.CanonicalHeaderKey(h.Name)], h.Value)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{"phalanx/" + Version}
	}
	return req.WithContext(context.Background())
}

// classifyH3 maps an HTTP/3 or QUIC error to its kind; started reports
// whether any response body had been read, handshake whether the error
// ended the handshake. The mapping (README, HTTP/3):
//
//   - the stream's or the connection's deadline, a QUIC idle or handshake
//     timeout: timeout;
//   - a QUIC stateless reset (RFC 9000 section 10.3), or the server
//     resetting the request stream with an error code other than below:
//     reset;
//   - H3_REQUEST_REJECTED (RFC 9114 section 4.1.1: not processed; sent
//     once more, then an error): refused;
//   - H3 framing and message errors (H3_FRAME_*, H3_MESSAGE_ERROR,
//     H3_GENERAL_PROTOCOL_ERROR, H3_ID_ERROR, H3_SETTINGS_ERROR,
//     H3_MISSING_SETTINGS, H3_CLOSED_CRITICAL_STREAM,
//     QPACK_DECOMPRESSION_FAILED) and QUIC transport errors other than
//     the handshake's: protocol;
//   - a TLS alert in the handshake (QUIC's CRYPTO_ERROR, 0x100-0x1ff,
//     RFC 9001 section 4.8), a certificate that does not verify, no
//     common QUIC version: tls;
//   - CONNECTION_REFUSED from the server: connect;
//   - the server closing the connection with H3_NO_ERROR (a graceful
//     close) before any response byte: closed, inside one: truncated;
//   - socket errors as over TCP (classify).
func classifyH3(err error, started, handshake bool) measure.ErrorKind {
	var he *http3.Error
	var ae *quic.ApplicationError
	var te *quic.TransportError
	var se *quic.StreamError
	var vne *quic.VersionNegotiationError
	var ite *quic.IdleTimeoutError
	var hte *quic.HandshakeTimeoutError
	var sre *quic.StatelessResetError
	closed := func() measure.ErrorKind {
		if started {
			return measure.ErrTruncated
		}
		return measure.ErrClosed
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, errTimeout), errors.As(err, &ite), errors.As(err, &hte):
		return measure.ErrTimeout
	case errors.As(err, &sre):
		return measure.ErrReset
	case errors.As(err, &vne):
		return measure.ErrTLS
	case errors.As(err, &he):
		return h3CodeKind(he.ErrorCode, closed)
	case errors.As(err, &ae):
		return h3CodeKind(http3.ErrCode(ae.ErrorCode), closed)
	case errors.As(err, &se):
		return h3CodeKind(http3.ErrCode(se.ErrorCode), closed)
	case errors.As(err, &te):
		switch {
		case te.ErrorCode.IsCryptoError():
			return measure.ErrTLS
		case te.ErrorCode == quic.ConnectionRefused:
			return measure.ErrConnect
		case te.ErrorCode == quic.NoError:
			return closed()
		}
		return measure.ErrProtocol
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return measure.ErrPorts
	}
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ve) {
		return measure.ErrTLS
	}
	if handshake {
		return classifyDial(err, true)
	}
	return classify(err, started)
}

// h3CodeKind maps an HTTP/3 error code (RFC 9114 section 8.1) to a kind.
func h3CodeKind(code http3.ErrCode, closed func() measure.ErrorKind) measure.ErrorKind {
	switch code {
	case http3.ErrCodeNoError:
		return closed()
	case http3.ErrCodeRequestRejected:
		return measure.ErrRefused
	case http3.ErrCodeGeneralProtocolError, http3.ErrCodeStreamCreationError, http3.ErrCodeClosedCriticalStream,
		http3.ErrCodeFrameUnexpected, http3.ErrCodeFrameError, http3.ErrCodeIDError, http3.ErrCodeSettingsError,
		http3.ErrCodeMissingSettings, http3.ErrCodeMessageError, http3.ErrCodeQPACKDecompressionFailed:
		return measure.ErrProtocol
	}
	return measure.ErrReset
}
