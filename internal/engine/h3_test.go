package engine

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/phalanxload/phalanx/internal/h3test"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// h3Target starts an HTTP/3 test server running h, and returns it and its
// certificate (PEM).
func h3Target(t *testing.T, h http.HandlerFunc) (*h3test.Server, []byte) {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.NotFoundHandler()) // only for its certificate
	ts.StartTLS()
	cert := ts.TLS.Certificates[0]
	ca := pemCert(ts.Certificate().Raw)
	ts.Close()
	return h3test.Start(t, cert, h), ca
}

// runH3 runs plan p (conns connections) against s and returns the window's
// counts, the result and the latency and lateness sample counts.
func runH3(t *testing.T, p plan.Plan, conns int) (measure.Counts, Result, int64, int64) {
	t.Helper()
	e := newEngine(t, p, conns)
	prep, err := e.Prepare(context.Background())
	if err != nil {
		t.Fatalf("Prepare = %+v, %v", prep, err)
	}
	var total measure.Counts
	var hcount, late int64
	res, err := e.Run(context.Background(), time.Now().Add(50*time.Millisecond), func(iv Interval) {
		total.Add(&iv.Counts)
		hcount += iv.Hists.Latency.Count()
		late += iv.Hists.Lateness.Count()
		t.Logf("interval %d: %d conns, %d requests, %d errors, %d missed; handshake p50 %dus, latency p50 %dus",
			iv.Index, iv.Counts.ConnectionsOpened, iv.Counts.Requests, iv.Counts.ErrorTotal(), iv.Counts.Missed,
			iv.Hists.TLSFull.ValueAtPercentile(50), iv.Hists.Latency.ValueAtPercentile(50))
	})
	if err != nil {
		t.Fatal(err)
	}
	if hcount != total.Requests {
		t.Errorf("latency histogram holds %d samples, requests %d", hcount, total.Requests)
	}
	return total, res, hcount, late
}

// checkH3Exact checks that the engine's requests add up with the server's
// and that its connections are the server's QUIC connections, each one a
// TLS handshake over QUIC v1 with ALPN h3.
func checkH3Exact(t *testing.T, s *h3test.Server, total measure.Counts, res Result) {
	t.Helper()
	if got := total.Requests + total.ErrorTotal() + res.InFlight; got != res.Issued {
		t.Errorf("completed %d + errors %d + in flight %d = %d, want issued %d", total.Requests, total.ErrorTotal(), res.InFlight, got, res.Issued)
	}
	if total.ErrorTotal() != 0 {
		t.Errorf("errors: %v", total.ErrorMap())
	}
	if got := s.Requests.Load(); got != res.Issued {
		t.Errorf("server handled %d requests, engine issued %d", got, res.Issued)
	}
	if !h3test.WaitFor(func() bool { return s.Conns.Load() >= total.ConnectionsOpened }) || s.Conns.Load() != total.ConnectionsOpened {
		t.Errorf("server accepted %d QUIC connections, engine opened %d", s.Conns.Load(), total.ConnectionsOpened)
	}
	if n := total.ConnectionsOpened; total.HandshakesFull+total.HandshakesResumed != n {
		t.Errorf("handshakes %d full + %d resumed, want the %d connections", total.HandshakesFull, total.HandshakesResumed, n)
	}
	for _, k := range []string{"transport:QUIC v1", "alpn:h3", "version:TLS 1.3"} {
		if total.TLS[k] != total.ConnectionsOpened {
			t.Errorf("TLS[%q] = %d, want every connection (%d): %v", k, total.TLS[k], total.ConnectionsOpened, total.TLS)
		}
	}
	if total.Status[200] != total.Requests {
		t.Errorf("status 200: %d of %d", total.Status[200], total.Requests)
	}
}

func hello(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello world")) }

func TestHTTP3ClosedLoop(t *testing.T) {
	s, ca := h3Target(t, hello)
	p := plan.Plan{URL: s.URL + "/x?y=1", Protocol: plan.H3, Connections: 4, Duration: time.Second, Interval: 500 * time.Millisecond, TLS: plan.TLS{CAPEM: ca}}
	total, res, _, late := runH3(t, p, 4)
	checkH3Exact(t, s, total, res)
	if total.ConnectionsOpened != 4 || total.Reconnects != 0 {
		t.Errorf("%d connections opened, %d reconnects: want the 4 prepared", total.ConnectionsOpened, total.Reconnects)
	}
	if total.Requests < 40 {
		t.Errorf("%d requests in 1 s on 4 connections", total.Requests)
	}
	if late != 0 {
		t.Errorf("closed loop recorded %d lateness samples", late)
	}
	if total.BodyBytes != 11*total.Requests || total.BytesRead < total.BodyBytes {
		t.Errorf("body bytes %d, read %d, for %d responses of 11 bytes", total.BodyBytes, total.BytesRead, total.Requests)
	}
}

func TestHTTP3OpenLoop(t *testing.T) {
	s, ca := h3Target(t, hello)
	p := plan.Plan{URL: s.URL + "/", Protocol: plan.H3, Connections: 2, MaxConnections: 8, Duration: time.Second, Interval: 500 * time.Millisecond,
		Load: plan.OpenLoop, Rate: 200, TLS: plan.TLS{CAPEM: ca}}
	total, res, _, late := runH3(t, p, 2)
	checkH3Exact(t, s, total, res)
	checkOpenTickets(t, total, res, late, 200)
}

// checkOpenTickets checks that every one of an open-loop run's tickets was
// sent or counted unsent, and that every send's lateness was recorded.
func checkOpenTickets(t *testing.T, total measure.Counts, res Result, late, tickets int64) {
	t.Helper()
	if got := res.Issued + total.Unsent; got != tickets {
		t.Errorf("issued %d + unsent %d = %d, want the %d tickets", res.Issued, total.Unsent, got, tickets)
	}
	if late != res.Issued-res.InFlight {
		t.Errorf("%d lateness samples for %d requests ended in the window", late, res.Issued-res.InFlight)
	}
}

func TestHTTP3ConnectionRate(t *testing.T) {
	s, ca := h3Target(t, hello)
	p := plan.Plan{URL: s.URL + "/", Protocol: plan.H3, Connections: 2, MaxConnections: 20, Duration: time.Second, Interval: 500 * time.Millisecond,
		Load: plan.OpenLoop, Rate: 100, ConnectionRate: true, RequestsPerConnection: 2, TLS: plan.TLS{CAPEM: ca}}
	total, res, _, _ := runH3(t, p, 2)
	checkH3Exact(t, s, total, res)
	if got := total.ConnectionsOpened + total.Unsent; got != 100 {
		t.Errorf("connections opened %d + unsent %d = %d, want the 100 tickets", total.ConnectionsOpened, total.Unsent, got)
	}
	if total.HandshakesFull != total.ConnectionsOpened {
		t.Errorf("full handshakes %d of %d connections (no resumption asked)", total.HandshakesFull, total.ConnectionsOpened)
	}
	if n, c := res.Issued, total.ConnectionsOpened; n > 2*c || n < 2*(c-20) {
		t.Errorf("issued %d requests on %d connections, want 2 each", n, c)
	}
}

// TestClassifyH3 maps QUIC and HTTP/3 errors to the error kinds as the
// README's HTTP/3 section says.
func TestClassifyH3(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		started   bool
		want      measure.ErrorKind
		handshake bool
	}{
		{"deadline", context.DeadlineExceeded, false, measure.ErrTimeout, false},
		{"idle timeout", &quic.IdleTimeoutError{}, false, measure.ErrTimeout, false},
		{"handshake timeout", &quic.HandshakeTimeoutError{}, false, measure.ErrTimeout, true},
		{"stateless reset", &quic.StatelessResetError{}, false, measure.ErrReset, false},
		{"request rejected", &http3.Error{Remote: true, ErrorCode: http3.ErrCodeRequestRejected}, false, measure.ErrRefused, false},
		{"stream reset", &quic.StreamError{Remote: true, ErrorCode: quic.StreamErrorCode(http3.ErrCodeInternalError)}, false, measure.ErrReset, false},
		{"frame error", &http3.Error{Remote: true, ErrorCode: http3.ErrCodeFrameError}, true, measure.ErrProtocol, false},
		{"qpack", &quic.ApplicationError{Remote: true, ErrorCode: quic.ApplicationErrorCode(http3.ErrCodeQPACKDecompressionFailed)}, false, measure.ErrProtocol, false},
		{"graceful close", &quic.ApplicationError{Remote: true, ErrorCode: quic.ApplicationErrorCode(http3.ErrCodeNoError)}, false, measure.ErrClosed, false},
		{"graceful close in a body", &quic.ApplicationError{Remote: true, ErrorCode: quic.ApplicationErrorCode(http3.ErrCodeNoError)}, true, measure.ErrTruncated, false},
		{"crypto error", &quic.TransportError{Remote: true, ErrorCode: quic.TransportErrorCode(0x100 + 40)}, false, measure.ErrTLS, true},
		{"connection refused", &quic.TransportError{Remote: true, ErrorCode: quic.ConnectionRefused}, false, measure.ErrConnect, true},
		{"flow control", &quic.TransportError{Remote: true, ErrorCode: quic.FlowControlError}, false, measure.ErrProtocol, false},
		{"version", &quic.VersionNegotiationError{}, false, measure.ErrTLS, true},
		{"ports", fmt.Errorf("listen: %w", syscall.EADDRNOTAVAIL), false, measure.ErrPorts, true},
	} {
		if got := classifyH3(tc.err, tc.started, tc.handshake); got != tc.want {
			t.Errorf("classifyH3(%s: %v, started %v) = %v, want %v", tc.name, tc.err, tc.started, got, tc.want)
		}
	}
}

// TestHTTP3Resume: at a connection rate with half the handshakes offered
// a session, every QUIC handshake the engine counts as resumed is one the
// server resumed, exactly, and some were (the first offers of each worker
// find no session yet, and a session arrives after the handshake).
func TestHTTP3Resume(t *testing.T) {
	s, ca := h3Target(t, hello)
	p := plan.Plan{URL: s.URL + "/", Protocol: plan.H3, Connections: 2, MaxConnections: 20, Duration: time.Second, Interval: 500 * time.Millisecond,
		Load: plan.OpenLoop, Rate: 60, ConnectionRate: true, RequestsPerConnection: 1, TLS: plan.TLS{CAPEM: ca, Resume: true, ResumeRatio: 0.5}}
	total, res, _, _ := runH3(t, p, 2)
	checkH3Exact(t, s, total, res)
	if !h3test.WaitFor(func() bool { return s.Resumed.Load() >= total.HandshakesResumed }) || s.Resumed.Load() != total.HandshakesResumed {
		t.Errorf("server resumed %d handshakes, engine counted %d resumed", s.Resumed.Load(), total.HandshakesResumed)
	}
	n := total.HandshakesFull + total.HandshakesResumed
	if total.HandshakesResumed == 0 || total.HandshakesResumed > n/2+2 {
		t.Errorf("%d of %d handshakes resumed, want some, at most about half (ratio 0.5)", total.HandshakesResumed, n)
	}
	if total.HandshakesRefused != 0 {
		t.Errorf("%d offered but refused: the server resumes every session it issued", total.HandshakesRefused)
	}
	t.Logf("%d full, %d resumed, %d refused; server resumed %d", total.HandshakesFull, total.HandshakesResumed, total.HandshakesRefused, s.Resumed.Load())
}

// TestHTTP3NoAnswerIsConnect: a QUIC handshake that never hears from the
// server (nothing listening on the UDP port, or a socket that reads
// nothing) is a connect error, as TCP's refused connection, not a timeout;
// no request completes.
func TestHTTP3NoAnswerIsConnect(t *testing.T) {
	held, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	free, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.LocalAddr().String()
	_ = free.Close()
	for _, tc := range []struct{ name, addr string }{
		{"a socket that drops everything", held.LocalAddr().String()},
		{"nothing listening", freeAddr},
	} {
		p := plan.Plan{URL: "https://" + tc.addr + "/", Protocol: plan.H3, Connections: 2, Duration: time.Second,
			Interval: 500 * time.Millisecond, Timeout: 300 * time.Millisecond}
		e := newEngine(t, p, 2)
		if _, err := e.Prepare(context.Background()); err == nil || !strings.Contains(err.Error(), "no answer from the server") {
			t.Errorf("%s: Prepare: %v, want its connections not opened, no answer from the server", tc.name, err)
		}
		var total measure.Counts
		if _, err := e.Run(context.Background(), time.Now().Add(50*time.Millisecond), func(iv Interval) { total.Add(&iv.Counts) }); err != nil {
			t.Fatalf("%s: Run: %v", tc.name, err)
		}
		errs := total.ErrorMap()
		if total.Requests != 0 || errs["connect"] == 0 || errs["timeout"] != 0 || len(errs) != 1 {
			t.Errorf("%s: %d requests, errors %v; want none and only connect errors", tc.name, total.Requests, errs)
		}
	}
}

// h3EarlyPlan is a connection-rate plan against s whose every handshake
// offers a session and sends its request in 0-RTT (plan TLS.EarlyData).
func h3EarlyPlan(s *h3test.Server, ca []byte) plan.Plan {
	return plan.Plan{URL: s.URL + "/", Protocol: plan.H3, Connections: 2, MaxConnections: 20, Duration: time.Second, Interval: 500 * time.Millisecond,
		Load: plan.OpenLoop, Rate: 60, ConnectionRate: true, RequestsPerConnection: 2, TLS: plan.TLS{CAPEM: ca, Resume: true, EarlyData: true}}
}

// TestHTTP3EarlyData: with early data, every connection that offers a
// session sends its first request in 0-RTT, and the handshakes the engine
// counts as 0-RTT accepted are exactly the requests the server received
// in 0-RTT and its connections that used it; every request reaches the
// server once.
func TestHTTP3EarlyData(t *testing.T) {
	skip0RTTUnderRace(t)
	s, ca := h3Target(t, hello)
	total, res, _, _ := runH3(t, h3EarlyPlan(s, ca), 2)
	checkH3Exact(t, s, total, res)
	acc := total.HandshakesEarlyAccepted
	if !h3test.WaitFor(func() bool { return s.EarlyRequests.Load() >= acc && s.Early.Load() >= acc }) ||
		s.EarlyRequests.Load() != acc || s.Early.Load() != acc {
		t.Errorf("engine counted %d 0-RTT accepted; server: %d requests in 0-RTT, %d connections used it", acc, s.EarlyRequests.Load(), s.Early.Load())
	}
	if acc == 0 || total.HandshakesEarlyOffered != acc || acc > total.HandshakesResumed {
		t.Errorf("0-RTT %d offered, %d accepted, %d resumed: want some accepted, all offered accepted, a part of resumed", total.HandshakesEarlyOffered, acc, total.HandshakesResumed)
	}
	t.Logf("%d full, %d resumed, 0-RTT %d offered, %d accepted; server: %d early requests", total.HandshakesFull, total.HandshakesResumed,
		total.HandshakesEarlyOffered, acc, s.EarlyRequests.Load())
}

// TestHTTP3EarlyDataRejected: a server that rejects 0-RTT (still resuming)
// gets every request once, in 1-RTT: each rejection is counted (offered,
// not accepted), the request sent again on a new connection, no error and
// no retry. The handshakes are not compared exactly: quic-go's HTTP/3
// client may close a rejected connection before its handshake ends (its
// control stream, opened after the rejection, fails), a connection
// counted opened without a handshake, and the server may not see the end
// of a handshake whose connection closes right after it.
func TestHTTP3EarlyDataRejected(t *testing.T) {
	skip0RTTUnderRace(t)
	s, ca := h3Target(t, hello)
	s.Reject0RTT.Store(true)
	total, res, _, _ := runH3(t, h3EarlyPlan(s, ca), 2)
	if got := total.Requests + total.ErrorTotal() + res.InFlight; got != res.Issued || total.ErrorTotal() != 0 || s.Requests.Load() != res.Issued {
		t.Errorf("completed %d, errors %v, in flight %d, issued %d: the server handled %d; want every issued request handled once, no error",
			total.Requests, total.ErrorMap(), res.InFlight, res.Issued, s.Requests.Load())
	}
	if !h3test.WaitFor(func() bool { return s.Conns.Load() >= total.ConnectionsOpened }) || s.Conns.Load() != total.ConnectionsOpened {
		t.Errorf("server accepted %d QUIC connections, engine opened %d", s.Conns.Load(), total.ConnectionsOpened)
	}
	if total.HandshakesEarlyOffered == 0 || total.HandshakesEarlyAccepted != 0 || total.HandshakesFull+total.HandshakesResumed > total.ConnectionsOpened {
		t.Errorf("0-RTT %d offered, %d accepted; %d full + %d resumed of %d connections: want some offered, none accepted", total.HandshakesEarlyOffered,
			total.HandshakesEarlyAccepted, total.HandshakesFull, total.HandshakesResumed, total.ConnectionsOpened)
	}
	if s.Resumed.Load() > total.HandshakesResumed || s.Early.Load() != 0 || s.EarlyRequests.Load() != 0 {
		t.Errorf("server resumed %d (engine %d), %d used 0-RTT, %d requests in it: want at most the engine's resumed, no 0-RTT", s.Resumed.Load(), total.HandshakesResumed, s.Early.Load(), s.EarlyRequests.Load())
	}
	if total.Retries != 0 {
		t.Errorf("%d retries: a 0-RTT request sent again is not a retry", total.Retries)
	}
	t.Logf("%d connections, %d full, %d resumed, 0-RTT %d offered (all rejected); server handled %d, resumed %d", total.ConnectionsOpened, total.HandshakesFull,
		total.HandshakesResumed, total.HandshakesEarlyOffered, s.Requests.Load(), s.Resumed.Load())
}
