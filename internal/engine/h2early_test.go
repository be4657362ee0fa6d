package engine

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// runH2 runs p on conns connections (runCounted) and returns the run's
// counts, its result and how long preparing and running took.
func runH2(t *testing.T, p plan.Plan, conns int) (measure.Counts, Result, time.Duration) {
	t.Helper()
	t0 := time.Now()
	res, total := runCounted(t, newEngine(t, p, conns))
	return total, res, time.Since(t0)
}

// uploadMix is a POST of a 200 KiB body to /upload (more than the
// server's 64 KiB stream window) and a GET of /small, one each per cycle.
func uploadMix(url string) []plan.Request {
	return []plan.Request{
		{Method: "POST", URL: url + "/upload", Body: bytes.Repeat([]byte("x"), 200<<10)},
		{Method: "GET", URL: url + "/small"},
	}
}

// TestH2EarlyResponseBeforeBody: a server that answers an upload larger
// than the stream window before reading its body (405 with END_STREAM,
// then RST_STREAM(NO_ERROR) as NGINX does, or no reset at all) gets every
// response counted (RFC 9113 section 8.1: the client must not discard it),
// the rest of the body is not sent, the GETs sharing the connection are
// unharmed, one connection serves the whole run, and nothing waits for the
// timeout (the run takes well under one).
func TestH2EarlyResponseBeforeBody(t *testing.T) {
	for _, tc := range []struct {
		name  string
		early h2Action
	}{{"reset", h2Early}, {"no reset", h2EarlyNoReset}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newH2FrameServer(t, func(_ int64, method, path string) h2Action {
				if path == "/upload" {
					return tc.early
				}
				return h2Answer
			})
			const n, timeout = 200, 10 * time.Second
			p := plan.Plan{URL: srv.url + "/", Mix: uploadMix(srv.url), Protocol: plan.H2, MaxStreams: 4, Connections: 1,
				Requests: n, Timeout: timeout, TLS: plan.TLS{CAPEM: srv.ca}}
			total, res, took := runH2(t, p, 1)
			srv.check(t)
			actions, resets := srv.counts(t)
			t.Logf("%v: statuses %v, errors %v, connections %d; server: %d streams, actions %v, client resets %v, most body bytes %v",
				took, total.StatusMap(), total.ErrorMap(), total.ConnectionsOpened, srv.streams.Load(), actions, resets, srv.bodyMax)
			if total.Status[405] != n/2 || total.Status[200] != n/2 || total.ErrorTotal() != 0 || res.Issued != n {
				t.Errorf("statuses %v, errors %v, issued %d: want %d × 405 and %d × 200, no error", total.StatusMap(), total.ErrorMap(), res.Issued, n/2, n/2)
			}
			if actions[tc.early] != n/2 || actions[h2Answer] != n/2 || srv.streams.Load() != n {
				t.Errorf("server: %d streams, actions %v: want %d early answers and %d GETs", srv.streams.Load(), actions, n/2, n/2)
			}
			if total.ConnectionsOpened != 1 || srv.accepted.Load() != 1 || total.Reconnects != 0 {
				t.Errorf("connections: %d opened, %d accepted, %d reconnects: want the one connection for the whole run", total.ConnectionsOpened, srv.accepted.Load(), total.Reconnects)
			}
			if got := srv.bodyMax["/upload"]; got > 65535 {
				t.Errorf("server received %d body bytes on one upload: the body must stop within the 65535-byte window", got)
			}
			if tc.early == h2EarlyNoReset && resets[http2.ErrCodeCancel] != n/2 {
				t.Errorf("client resets %v: want RST_STREAM(CANCEL) for each of the %d half-closed uploads", resets, n/2)
			}
			if took >= timeout/2 {
				t.Errorf("run took %v: streams waited for the %v timeout", took, timeout)
			}
		})
	}
}

// TestH2BodyTimeoutResetsOnlyTheStream: an upload whose body never gets
// window (the server neither answers nor reads it) times out as `timeout`
// (not `closed`), is reset alone with RST_STREAM(CANCEL), and the GETs on
// the same connection all complete on it.
func TestH2BodyTimeoutResetsOnlyTheStream(t *testing.T) {
	srv := newH2FrameServer(t, func(_ int64, method, path string) h2Action {
		if path == "/upload" {
			return h2Stall
		}
		return h2Answer
	})
	mix := uploadMix(srv.url)
	mix[1].Weight = 4
	const n = 50
	p := plan.Plan{URL: srv.url + "/", Mix: mix, Protocol: plan.H2, MaxStreams: 4, Connections: 1,
		Requests: n, Timeout: 500 * time.Millisecond, TLS: plan.TLS{CAPEM: srv.ca}}
	total, res, took := runH2(t, p, 1)
	srv.check(t)
	actions, resets := srv.counts(t)
	t.Logf("%v: statuses %v, errors %v, connections %d; server: actions %v, client resets %v", took, total.StatusMap(), total.ErrorMap(),
		total.ConnectionsOpened, actions, resets)
	if total.Errors[measure.ErrTimeout] != n/5 || total.ErrorTotal() != n/5 || total.Status[200] != n*4/5 || res.Issued != n {
		t.Errorf("statuses %v, errors %v, issued %d: want %d × 200 and exactly {timeout: %d}", total.StatusMap(), total.ErrorMap(), res.Issued, n*4/5, n/5)
	}
	if resets[http2.ErrCodeCancel] != n/5 || len(resets) != 1 {
		t.Errorf("client resets %v: want RST_STREAM(CANCEL) for each of the %d stalled uploads, nothing else", resets, n/5)
	}
	if total.ConnectionsOpened != 1 || srv.accepted.Load() != 1 {
		t.Errorf("connections: %d opened, %d accepted: a body timeout must not end the connection", total.ConnectionsOpened, srv.accepted.Load())
	}
}

// TestH2RefusedStreamNamed: a stream the server refuses with
// RST_STREAM(REFUSED_STREAM) is sent once more, counted as a retry; refused
// again it is a `refused` error (not `closed`), and a resend the server
// accepts completes. One stream slot, so that each resend directly
// follows its refusal: /always is refused every time, /once only on
// every other stream.
func TestH2RefusedStreamNamed(t *testing.T) {
	var onceSeen int
	srv := newH2FrameServer(t, func(_ int64, _, path string) h2Action {
		switch path {
		case "/always":
			return h2Refuse
		case "/once":
			onceSeen++ // the server's one goroutine (one connection)
			if onceSeen%2 == 1 {
				return h2Refuse
			}
		}
		return h2Answer
	})
	const n = 50
	p := plan.Plan{URL: srv.url + "/", Protocol: plan.H2, MaxStreams: 1, Connections: 1, Requests: n, Timeout: 5 * time.Second,
		TLS: plan.TLS{CAPEM: srv.ca}, Mix: []plan.Request{{URL: srv.url + "/always"}, {URL: srv.url + "/once"}, {URL: srv.url + "/small", Weight: 3}}}
	total, res, _ := runH2(t, p, 1)
	srv.check(t)
	actions, _ := srv.counts(t)
	t.Logf("statuses %v, errors %v, retries %d; server: actions %v", total.StatusMap(), total.ErrorMap(), total.Retries, actions)
	if total.Errors[measure.ErrRefused] != n/5 || total.ErrorTotal() != n/5 || total.Status[200] != n*4/5 || res.Issued != n {
		t.Errorf("statuses %v, errors %v, issued %d: want %d × 200 and exactly {refused: %d}", total.StatusMap(), total.ErrorMap(), res.Issued, n*4/5, n/5)
	}
	if total.Retries != 2*n/5 {
		t.Errorf("retries %d, want %d: one resend per refused /always and /once", total.Retries, 2*n/5)
	}
	if actions[h2Refuse] != 3*n/5 || actions[h2Answer] != n*4/5 {
		t.Errorf("server actions %v: want %d refused streams and %d answered", actions, 3*n/5, n*4/5)
	}
	// Each request of the mix apart (count mode: exact proportions):
	// /always refused every time, /once and /small answered; they sum to
	// the totals, each latency histogram holding its responses.
	if len(res.Mix) != 3 {
		t.Fatalf("%d mix results, want 3", len(res.Mix))
	}
	var sum measure.Counts
	for i, want := range []struct{ ok, refused int64 }{{0, n / 5}, {n / 5, 0}, {3 * n / 5, 0}} {
		m := res.Mix[i]
		sum.Add(&m.Counts)
		if m.Counts.Status[200] != want.ok || m.Counts.Requests != want.ok || m.Counts.Errors[measure.ErrRefused] != want.refused ||
			m.Counts.ErrorTotal() != want.refused || m.Latency.Count() != want.ok {
			t.Errorf("mix request %d: statuses %v, errors %v, %d latencies; want %d × 200, %d refused", i,
				m.Counts.StatusMap(), m.Counts.ErrorMap(), m.Latency.Count(), want.ok, want.refused)
		}
	}
	if sum.Requests != total.Requests || sum.ErrorTotal() != total.ErrorTotal() || sum.BytesRead != total.BytesRead {
		t.Errorf("mix sums to %d requests, %d errors, %d bytes; totals %d, %d, %d", sum.Requests, sum.ErrorTotal(), sum.BytesRead,
			total.Requests, total.ErrorTotal(), total.BytesRead)
	}
}

// TestH2ResponseHeadersContinued: response header blocks split over
// HEADERS and CONTINUATION, with a 3,000-byte field the server's encoder
// puts in its dynamic table, are decoded (the engine's own decoder sees
// every block), every response counted with its frames' bytes.
func TestH2ResponseHeadersContinued(t *testing.T) {
	srv := newH2FrameServer(t, func(int64, string, string) h2Action { return h2Answer })
	srv.continued = true
	const n = 200
	p := plan.Plan{URL: srv.url + "/", Protocol: plan.H2, MaxStreams: 4, Connections: 1, Requests: n, TLS: plan.TLS{CAPEM: srv.ca}}
	total, res, _ := runH2(t, p, 1)
	srv.check(t)
	if total.Status[200] != n || total.ErrorTotal() != 0 || res.Issued != n || total.ConnectionsOpened != 1 {
		t.Fatalf("statuses %v, errors %v, issued %d, connections %d: want %d × 200 on one connection", total.StatusMap(), total.ErrorMap(), res.Issued, total.ConnectionsOpened, n)
	}
	// Per response: two header frames (9-byte headers each, the first
	// block holding the 3,000-byte literal) and a DATA frame of 2 bytes.
	if per := total.BytesRead / n; per < 2*9+9+2+5 || total.BytesRead < 3000 {
		t.Errorf("%d bytes read (%d per response): want the frames' bytes counted", total.BytesRead, per)
	}
	// Split as h2load's traffic line: the header blocks (HPACK), the DATA
	// payloads, and the three frames' 9-byte headers as framing; every
	// response said content-encoding: br.
	if total.HeaderFieldBytes < 3000*n {
		t.Errorf("%d header field bytes: want the decoded fields (3,000-byte x-pad each) counted", total.HeaderFieldBytes)
	}
	if total.BodyBytes != 2*n || total.BytesRead-total.HeaderBytes-total.BodyBytes != 3*9*n || total.Encodings[measure.EncBrotli] != n {
		t.Errorf("%d bytes read: %d header, %d body, %d framing; encodings %v; want %d body, %d framing, %d br",
			total.BytesRead, total.HeaderBytes, total.BodyBytes, total.BytesRead-total.HeaderBytes-total.BodyBytes, total.EncodingMap(), 2*n, 3*9*n, n)
	}
}

// TestH2ResponseTimeoutResetsOnlyTheStream: GETs the server never answers
// end as `timeout` at their deadline (the slot's h2watch, whose timer
// stays armed across streams and re-arms for a later one) and are reset
// with RST_STREAM(CANCEL); the answered GETs between them on the same
// stream slots complete, on one connection. No stall ends early: each
// holds its slot for the whole timeout, so 10 stalls on 4 slots take at
// least 10 × 300 ms / 4.
func TestH2ResponseTimeoutResetsOnlyTheStream(t *testing.T) {
	srv := newH2FrameServer(t, func(_ int64, _, path string) h2Action {
		if path == "/stall" {
			return h2Stall
		}
		return h2Answer
	})
	const n, stalls, timeout = 50, 10, 300 * time.Millisecond
	mix := []plan.Request{{Method: "GET", URL: srv.url + "/stall"}, {Method: "GET", URL: srv.url + "/small", Weight: 4}}
	p := plan.Plan{URL: srv.url + "/", Mix: mix, Protocol: plan.H2, MaxStreams: 4, Connections: 1,
		Requests: n, Timeout: timeout, TLS: plan.TLS{CAPEM: srv.ca}}
	total, res, took := runH2(t, p, 1)
	srv.check(t)
	_, resets := srv.counts(t)
	t.Logf("%v: statuses %v, errors %v, connections %d; client resets %v", took, total.StatusMap(), total.ErrorMap(), total.ConnectionsOpened, resets)
	if total.Errors[measure.ErrTimeout] != stalls || total.ErrorTotal() != stalls || total.Status[200] != n-stalls || res.Issued != n {
		t.Errorf("statuses %v, errors %v, issued %d: want %d × 200 and exactly {timeout: %d}", total.StatusMap(), total.ErrorMap(), res.Issued, n-stalls, stalls)
	}
	if resets[http2.ErrCodeCancel] != stalls || len(resets) != 1 {
		t.Errorf("client resets %v: want RST_STREAM(CANCEL) for each of the %d stalled GETs, nothing else", resets, stalls)
	}
	if total.ConnectionsOpened != 1 {
		t.Errorf("%d connections opened: a stream timeout must not end the connection", total.ConnectionsOpened)
	}
	if min := stalls * timeout / 4; took < min {
		t.Errorf("run took %v: under %v, so some stall ended before its timeout", took, min)
	}
}

// TestH2ChainedCountsExact: closed-loop streams that the session's read
// loop continues itself (h2chain.go) are counted as the slots' goroutines
// count them, and every kind of stream end hands a slot back intact: a
// count-mode mix of plain GETs, a GET the server always refuses (resent
// once, a retry, then a refused error), a GET it sometimes never answers
// (a timeout: RST_STREAM, the connection kept) and a POST with a body
// (never chained) gives exact totals, per mix entry, and the server's
// counts equal the report's; most requests were sent by the read loops,
// so the chains were exercised. Open loop (its chained slots' tickets sent
// by the sessions' pacers, h2pacer.go) counts the same.
func TestH2ChainedCountsExact(t *testing.T) {
	t.Run("closed", func(t *testing.T) { testH2ChainedCountsExact(t, plan.ClosedLoop) })
	t.Run("open", func(t *testing.T) { testH2ChainedCountsExact(t, plan.OpenLoop) })
}

func testH2ChainedCountsExact(t *testing.T, load plan.Load) {
	const stallEvery = 50
	var stalls atomic.Int64 // /stall streams seen
	srv := newH2FrameServer(t, func(_ int64, _, path string) h2Action {
		switch path {
		case "/refuse":
			return h2Refuse
		case "/stall":
			if stalls.Add(1)%stallEvery == 0 {
				return h2Stall
			}
		}
		return h2Answer
	})
	const n = 2000 // 20 per mix cycle
	p := plan.Plan{URL: srv.url + "/", Protocol: plan.H2, MaxStreams: 8, Connections: 2, Requests: n, Timeout: 400 * time.Millisecond,
		TLS: plan.TLS{CAPEM: srv.ca}, Mix: []plan.Request{
			{URL: srv.url + "/a", Weight: 16},
			{URL: srv.url + "/refuse", Weight: 2},
			{URL: srv.url + "/stall"},
			{Method: "POST", URL: srv.url + "/post", Body: bytes.Repeat([]byte("b"), 100)},
		}}
	if load == plan.OpenLoop {
		p.Load, p.Rate = plan.OpenLoop, 5000 // 0.4 s; 16 slots, each sending every 3.2 ms
	}
	e := newEngine(t, p, 2)
	res, total := runCounted(t, e)
	srv.check(t)
	actions, resets := srv.counts(t)
	var chained int64
	for _, sl := range e.slots {
		chained += sl.(*h2conn).chained.Load()
	}
	t.Logf("statuses %v, errors %v, retries %d, connections %d, chained %d; server: actions %v, resets %v",
		total.StatusMap(), total.ErrorMap(), total.Retries, total.ConnectionsOpened, chained, actions, resets)
	const refused, stalled = n * 2 / 20, n / 20 / stallEvery
	if res.Issued != n || total.Status[200] != n-refused-stalled || total.Requests != n-refused-stalled ||
		total.Errors[measure.ErrTimeout] != stalled || total.Errors[measure.ErrRefused] != refused || total.ErrorTotal() != refused+stalled {
		t.Errorf("issued %d, statuses %v, errors %v: want %d issued, %d × 200 and exactly {refused: %d, timeout: %d}",
			res.Issued, total.StatusMap(), total.ErrorMap(), n, n-refused-stalled, refused, stalled)
	}
	if total.Retries != refused || actions[h2Refuse] != 2*refused {
		t.Errorf("retries %d, server refused %d streams: want %d and %d (one resend per /refuse)", total.Retries, actions[h2Refuse], refused, 2*refused)
	}
	if actions[h2Answer] != total.Requests || actions[h2Stall] != stalled || resets[http2.ErrCodeCancel] != stalled {
		t.Errorf("server answered %d, stalled %d, got %d CANCEL resets: want %d, %d, %d", actions[h2Answer], actions[h2Stall],
			resets[http2.ErrCodeCancel], total.Requests, stalled, stalled)
	}
	if total.ConnectionsOpened != 2 {
		t.Errorf("%d connections, want 2: no stream end costs the connection", total.ConnectionsOpened)
	}
	for i, want := range []int64{n * 16 / 20, 0, n/20 - stalled, n / 20} {
		if m := res.Mix[i]; m.Counts.Status[200] != want || m.Latency.Count() != want {
			t.Errorf("mix request %d: statuses %v, %d latencies; want %d × 200", i, m.Counts.StatusMap(), m.Latency.Count(), want)
		}
	}
	if chained < n/2 {
		t.Errorf("%d of %d requests sent by the read loops, want at least half", chained, n)
	}
}
