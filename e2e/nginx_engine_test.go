package e2e

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/e2e/internal/nginxtest"
	"github.com/phalanxload/phalanx/internal/plan"
)

// The engine against a real NGINX, through an in-process cluster: NGINX's
// access log is an independent count of what the tool did (requests,
// connections, resumed sessions, protocol).

// TestNginxShortConnectionsResumeMatchLog: one request per connection with
// TLS resumption on. Every connection the tool opened and every resumed
// handshake it reports must be exactly NGINX's: its distinct $connection
// values and its $ssl_session_reused lines.
func TestNginxShortConnectionsResumeMatchLog(t *testing.T) {
	const n = 3000
	srv := nginxtest.Start(t, nginxtest.Options{})
	out := runCase(t, plan.Plan{
		URL: srv.URL(), Requests: n, Connections: 8, NoKeepAlive: true, Timeout: 5 * time.Second,
		// X25519 only: the hybrid ML-KEM key share is pure Go and several
		// times slower under the race detector; the group is not under test.
		TLS: plan.TLS{CAPEM: srv.CAPEM(), Resume: true, Curves: []string{"X25519"}},
	}, 2, 2)
	rep := out.Report
	lines := srv.WaitLogStable(t, 0)

	conns := map[int64]int{}
	reused := int64(0)
	status := map[int]int64{}
	for _, l := range lines {
		conns[l.Connection]++
		if l.SessionReused {
			reused++
		}
		status[l.Status]++
	}
	t.Logf("report: %d requests in %v, errors %v, connections %d, handshakes %+v; nginx: %d lines, %d connections, %d reused, status %v",
		rep.Requests, out.Elapsed, rep.Errors, rep.ConnectionsOpened, rep.Handshakes, len(lines), len(conns), reused, status)

	if rep.ErrorTotal() != 0 || rep.InFlight != 0 {
		t.Errorf("errors %v, in flight %d: want none", rep.Errors, rep.InFlight)
	}
	if rep.Requests != n || int64(len(lines)) != n || status[200] != n {
		t.Errorf("requests: report %d, nginx logged %d (status %v): want %d x 200", rep.Requests, len(lines), status, n)
	}
	if rep.ConnectionsOpened != int64(len(conns)) {
		t.Errorf("connections: report %d, nginx %d distinct: want equal", rep.ConnectionsOpened, len(conns))
	}
	for c, k := range conns {
		if k != 1 {
			t.Errorf("nginx connection %d served %d requests, want 1 (no keep-alive)", c, k)
			break
		}
	}
	if rep.Handshakes.Resumed != reused || rep.Handshakes.Full+rep.Handshakes.Resumed != int64(len(conns)) {
		t.Errorf("handshakes %+v, nginx: %d resumed of %d connections: want equal", rep.Handshakes, reused, len(conns))
	}
	// Two agents x two workers: one session cache each, so at most one
	// full handshake per connection slot.
	if rep.Handshakes.Resumed < n-8 {
		t.Errorf("resumed %d, want at least %d", rep.Handshakes.Resumed, n-8)
	}
}

// TestNginxHTTP2StreamsMatchLog: HTTP/2 with 10 streams per connection for
// 2 s. Every request the report counts as completed or in flight (drained
// after the window) is one NGINX access-log line, and every line is
// HTTP/2.0.
func TestNginxHTTP2StreamsMatchLog(t *testing.T) {
	srv := nginxtest.Start(t, nginxtest.Options{HTTP2: true})
	out := runCase(t, plan.Plan{
		URL: srv.URL(), Protocol: plan.H2, MaxStreams: 10, Connections: 4, Duration: 2 * time.Second,
		TLS: plan.TLS{CAPEM: srv.CAPEM(), Curves: []string{"X25519"}},
	}, 2, 2)
	rep := out.Report
	lines := srv.WaitLogStable(t, 0)
	protos := map[string]int64{}
	status := map[int]int64{}
	conns := map[int64]bool{}
	for _, l := range lines {
		protos[l.Protocol]++
		status[l.Status]++
		conns[l.Connection] = true
	}
	t.Logf("report: %d requests + %d in flight, errors %v, connections %d, max streams %d, ALPN %v; nginx: %d lines, %d connections, protocols %v, status %v",
		rep.Requests, rep.InFlight, rep.Errors, rep.ConnectionsOpened, rep.MaxStreams, rep.TLS.ALPN, len(lines), len(conns), protos, status)

	if rep.ErrorTotal() != 0 {
		t.Errorf("errors %v, want none", rep.Errors)
	}
	if rep.Requests == 0 {
		t.Fatal("no request completed")
	}
	if got := rep.Requests + rep.InFlight; got != int64(len(lines)) {
		t.Errorf("report requests %d + in flight %d = %d, nginx logged %d: want equal", rep.Requests, rep.InFlight, got, len(lines))
	}
	if protos["HTTP/2.0"] != int64(len(lines)) {
		t.Errorf("nginx protocols %v, want HTTP/2.0 on all %d lines", protos, len(lines))
	}
	if status[200] != int64(len(lines)) {
		t.Errorf("nginx status %v, want 200 on all %d lines", status, len(lines))
	}
	if rep.ConnectionsOpened != 4 || len(conns) != 4 {
		t.Errorf("connections: report %d, nginx %d: want 4", rep.ConnectionsOpened, len(conns))
	}
	if rep.MaxStreams != 10 || rep.TLS.ALPN["h2"] != 4 {
		t.Errorf("max streams %d, ALPN %v: want 10 streams, h2 on 4 connections", rep.MaxStreams, rep.TLS.ALPN)
	}
}

// TestNginxCountModeExact: count mode issues exactly N requests across the
// cluster, no more and no fewer: NGINX logs exactly N.
func TestNginxCountModeExact(t *testing.T) {
	const n = 5000
	srv := nginxtest.Start(t, nginxtest.Options{})
	out := runCase(t, plan.Plan{
		URL: srv.URL(), Requests: n, Connections: 10,
		TLS: plan.TLS{CAPEM: srv.CAPEM()},
	}, 2, 2)
	rep := out.Report
	lines := srv.WaitLogStable(t, 0)
	conns := map[int64]bool{}
	for _, l := range lines {
		conns[l.Connection] = true
	}
	t.Logf("report: %d requests, issued %d, in flight %d, errors %v, connections %d in %v; nginx: %d lines, %d connections",
		rep.Requests, rep.Issued, rep.InFlight, rep.Errors, rep.ConnectionsOpened, out.Elapsed, len(lines), len(conns))
	if len(lines) != n {
		t.Errorf("nginx logged %d requests, want exactly %d", len(lines), n)
	}
	if rep.Requests != n || rep.Issued != n || rep.Status["200"] != n || rep.ErrorTotal() != 0 || rep.InFlight != 0 {
		t.Errorf("report: requests %d, issued %d, status %v, errors %v, in flight %d: want %d x 200", rep.Requests, rep.Issued, rep.Status, rep.Errors, rep.InFlight, n)
	}
	if rep.ConnectionsOpened != 10 || len(conns) != 10 {
		t.Errorf("connections: report %d, nginx %d: want 10 (keep-alive)", rep.ConnectionsOpened, len(conns))
	}
}

// TestNginxIdleKeepAliveClosesMatchLog: open loop at 5 req/s over 20
// connections for 10 s against NGINX with keepalive_timeout 1s, so each
// connection sits idle about 4 s between requests and NGINX has closed it
// before nearly every reuse. No request fails; every one the report counts
// (completed or in flight) is one access-log line; the closed connections
// were reopened (reconnects).
func TestNginxIdleKeepAliveClosesMatchLog(t *testing.T) {
	srv := nginxtest.Start(t, nginxtest.Options{KeepaliveTimeout: time.Second})
	out := runCase(t, plan.Plan{
		URL: srv.URL(), Load: plan.OpenLoop, Rate: 5, Connections: 20, Duration: 10 * time.Second,
		TLS: plan.TLS{CAPEM: srv.CAPEM(), Curves: []string{"X25519"}},
	}, 2, 2)
	rep := out.Report
	lines := srv.WaitLogStable(t, 0)
	status, conns := logTally(lines)
	t.Logf("report: %d requests + %d in flight, issued %d, errors %v, connections %d, reconnects %d, retries %d; nginx: %d lines, %d connections, status %v",
		rep.Requests, rep.InFlight, rep.Issued, rep.Errors, rep.ConnectionsOpened, rep.Reconnects, rep.Retries, len(lines), len(conns), status)
	if rep.ErrorTotal() != 0 {
		t.Errorf("errors %v, want none", rep.Errors)
	}
	if got := rep.Requests + rep.InFlight; got != int64(len(lines)) || status[200] != int64(len(lines)) {
		t.Errorf("report requests %d + in flight %d = %d, nginx logged %d (status %v): want equal, all 200", rep.Requests, rep.InFlight, got, len(lines), status)
	}
	if rep.Requests < 45 {
		t.Errorf("%d requests, want about 50 (5/s for 10 s)", rep.Requests)
	}
	if rep.Reconnects < 20 {
		t.Errorf("%d reconnects, want at least 20: NGINX closed the idle connections", rep.Reconnects)
	}
}

// TestNginxBigHeaderLine: a location whose responses carry one 21,000-byte
// header line (over the reader's 16 KiB buffer): count mode, 2,000
// requests, no error, NGINX logs each once, and the report's wire bytes
// hold the header on every response.
func TestNginxBigHeaderLine(t *testing.T) {
	const n, part = 2000, 3500
	// nginx's configuration parser takes at most 4 KiB per parameter:
	// the header is six copies of a 3,500-byte variable.
	srv := nginxtest.Start(t, nginxtest.Options{Server: `
        location /bighdr {
            set $big "` + strings.Repeat("b", part) + `";
            add_header X-Big "$big$big$big$big$big$big";
            try_files /index.html =404;
        }`})
	out := runCase(t, plan.Plan{
		URL: srv.URL() + "bighdr", Requests: n, Connections: 4,
		TLS: plan.TLS{CAPEM: srv.CAPEM(), Curves: []string{"X25519"}},
	}, 2, 2)
	rep := out.Report
	lines := srv.WaitLogStable(t, 0)
	status := map[int]int64{}
	for _, l := range lines {
		status[l.Status]++
	}
	t.Logf("report: %d requests, errors %v, %d bytes read (%d per response); nginx: %d lines, status %v",
		rep.Requests, rep.Errors, rep.BytesRead, rep.BytesRead/max(rep.Requests, 1), len(lines), status)
	if rep.ErrorTotal() != 0 || rep.Requests != n || rep.Status["200"] != n {
		t.Errorf("report: requests %d, status %v, errors %v: want %d x 200", rep.Requests, rep.Status, rep.Errors, n)
	}
	if int64(len(lines)) != n || status[200] != n {
		t.Errorf("nginx logged %d (status %v), want %d x 200", len(lines), status, n)
	}
	if per := rep.BytesRead / n; per < 6*part+600 {
		t.Errorf("%d wire bytes per response, want at least %d (the header and the 600-byte page)", per, 6*part+600)
	}
}

// TestNginxHTTP2EarlyResponseToUpload: issue 17's item 2 against NGINX.
// A 200 KiB HTTP/2 POST (more than the 64 KiB stream window) to a static
// location, which NGINX answers with 405 before reading the body and then
// resets with RST_STREAM(NO_ERROR) (RFC 9113 section 8.1): every response
// is counted, none waits for the timeout or costs its connection, and
// NGINX's log equals the report (-X POST --body 200k --http2 -m 4 -c 2
// -n 200).
func TestNginxHTTP2EarlyResponseToUpload(t *testing.T) {
	const n = 200
	srv := nginxtest.Start(t, nginxtest.Options{HTTP2: true, Server: `
        location /upload {
            try_files /index.html =404;
        }`})
	out := runCase(t, plan.Plan{
		URL: srv.URL() + "upload", Method: "POST", Body: bytes.Repeat([]byte("x"), 200<<10),
		Protocol: plan.H2, MaxStreams: 4, Connections: 2, Requests: n, Timeout: 4 * time.Second,
		TLS: plan.TLS{CAPEM: srv.CAPEM(), Curves: []string{"X25519"}},
	}, 1, 2)
	rep := out.Report
	lines := srv.WaitLogStable(t, 0)
	status, conns := logTally(lines)
	t.Logf("report: %d requests in %v, status %v, errors %v, connections %d; nginx: %d lines, %d connections, status %v",
		rep.Requests, out.Elapsed, rep.Status, rep.Errors, rep.ConnectionsOpened, len(lines), len(conns), status)
	if rep.ErrorTotal() != 0 || rep.Requests != n || rep.Status["405"] != n {
		t.Errorf("report: requests %d, status %v, errors %v: want %d x 405, no error", rep.Requests, rep.Status, rep.Errors, n)
	}
	if int64(len(lines)) != n || status[405] != n {
		t.Errorf("nginx logged %d (status %v), want %d x 405", len(lines), status, n)
	}
	if rep.ConnectionsOpened != 2 || len(conns) != 2 {
		t.Errorf("connections: report %d, nginx %d: want 2 (an early response costs no connection)", rep.ConnectionsOpened, len(conns))
	}
	if out.Elapsed > 4*time.Second {
		t.Errorf("run took %v: requests waited for the 4 s timeout", out.Elapsed)
	}
}

// logTally returns an access log's lines by status and its connections.
func logTally(lines []nginxtest.LogLine) (status map[int]int64, conns map[int64]bool) {
	status, conns = map[int]int64{}, map[int64]bool{}
	for _, l := range lines {
		status[l.Status]++
		conns[l.Connection] = true
	}
	return status, conns
}
