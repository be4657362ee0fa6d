package e2e

import (
	"bufio"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
)

// TestCaseC23PhaseTimings covers field case C23. hey reported a
// "DNS+dialup" slowest time of 9,223,372,036 s on runs that reused
// connections: on a reused connection the connect hook never fired and a
// zero start time was subtracted anyway (resty, go-httpstat and oha had the
// same class of bug, oha under HTTP/2). What must hold: connect and TLS
// phase statistics cover new connections only, so their sample count is
// the number of connections opened (10 over HTTP/1.1 with c=10, 2 over
// HTTP/2 with 2 connections × 5 streams, for 10,000 requests each), and
// every phase value is ≥ 0 and < 1 s on loopback. (Phase timing cannot be
// turned off, so "latency unchanged without it" is not checked.)
func TestCaseC23PhaseTimings(t *testing.T) {
	const total = 10000

	t.Run("a_http1", func(t *testing.T) {
		resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
		srv := startRaw(t, &tls.Config{}, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
			for {
				if _, _, err := readRequest(br, st); err != nil {
					return
				}
				if _, err := c.Write(resp); err != nil {
					return
				}
			}
		})
		run := runCase(t, plan.Plan{URL: srv.URL("/"), Connections: 10, Requests: total}, 1, 2)
		r := run.Report
		t.Logf("completed %d, errors %v, connections opened %d (server accepted %d); connect %+v; tls %+v; ttfb %+v",
			r.Requests, r.Errors, r.ConnectionsOpened, srv.Stats.Accepted.Load(), r.ConnectUs, r.TLSHandshakeUs, r.TTFBUs)
		if r.Requests != total || r.ErrorTotal() != 0 {
			t.Errorf("completed %d, errors %v: want %d, none", r.Requests, r.Errors, total)
		}
		if r.ConnectionsOpened != 10 || srv.Stats.Accepted.Load() != 10 {
			t.Errorf("connections opened %d, server accepted %d: want 10 (one per connection, reused)", r.ConnectionsOpened, srv.Stats.Accepted.Load())
		}
		c23Phases(t, r, 10)
	})

	t.Run("b_http2", func(t *testing.T) {
		var (
			conns, requests, active, maxActive atomic.Int64
			protoErr                           atomic.Int64
		)
		ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			requests.Add(1)
			if req.ProtoMajor != 2 {
				protoErr.Add(1)
			}
			n := active.Add(1)
			for {
				m := maxActive.Load()
				if n <= m || maxActive.CompareAndSwap(m, n) {
					break
				}
			}
			defer active.Add(-1)
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("ok"))
		}))
		ts.EnableHTTP2 = true
		ts.TLS = &tls.Config{Certificates: []tls.Certificate{testCA(t).Cert}}
		ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		ts.Config.ErrorLog = nil
		ts.StartTLS()
		t.Cleanup(ts.Close)

		run := runCase(t, plan.Plan{
			URL: ts.URL + "/", Connections: 2, Protocol: plan.H2, MaxStreams: 5, Requests: total,
		}, 1, 2)
		r := run.Report
		t.Logf("completed %d, errors %v, connections opened %d (server saw %d), max streams %d (server saw %d at once), ALPN %v; connect %+v; tls %+v; ttfb %+v",
			r.Requests, r.Errors, r.ConnectionsOpened, conns.Load(), r.MaxStreams, maxActive.Load(), r.TLS.ALPN, r.ConnectUs, r.TLSHandshakeUs, r.TTFBUs)
		if r.Requests != total || r.ErrorTotal() != 0 || requests.Load() != total {
			t.Errorf("completed %d, errors %v, server handled %d: want %d, none, %d", r.Requests, r.Errors, requests.Load(), total, total)
		}
		if protoErr.Load() != 0 || r.TLS.ALPN["h2"] != 2 {
			t.Errorf("%d requests not over HTTP/2; ALPN %v: want h2 on both connections", protoErr.Load(), r.TLS.ALPN)
		}
		if r.ConnectionsOpened != 2 || conns.Load() != 2 {
			t.Errorf("connections opened %d, server saw %d: want 2", r.ConnectionsOpened, conns.Load())
		}
		if r.MaxStreams != 5 || maxActive.Load() > 10 {
			t.Errorf("streams per connection %d, server saw %d at once: want 5, at most 10", r.MaxStreams, maxActive.Load())
		}
		c23Phases(t, r, 2)
	})
}

// c23Phases checks that the connect and TLS phases have one sample per new
// connection and every value in [0, 1 s), and that TTFB has one sample per
// completed response, each in [0, timeout).
func c23Phases(t *testing.T, r *report.Report, conns int64) {
	t.Helper()
	if f := agentFailures(r); f != "" {
		t.Errorf("agent failures: %s", f)
	}
	const second = int64(time.Second / time.Microsecond)
	for _, ph := range []struct {
		name  string
		s     *hist.Summary
		count int64
		below int64
	}{
		{"connect", r.ConnectUs, conns, second},
		{"tls handshake", r.TLSHandshakeUs, conns, second},
		{"tls handshake (full)", r.TLSHandshakeFullUs, conns, second},
		{"ttfb", r.TTFBUs, r.Requests, plan.DefaultTimeout.Microseconds()},
	} {
		if ph.s == nil {
			t.Errorf("%s: no samples, want %d", ph.name, ph.count)
			continue
		}
		if ph.s.Count != ph.count {
			t.Errorf("%s: %d samples, want %d", ph.name, ph.s.Count, ph.count)
		}
		if ph.s.Min < 0 || ph.s.Max >= ph.below || ph.s.Mean < 0 || ph.s.Mean >= float64(ph.below) {
			t.Errorf("%s: min %d µs, mean %.0f µs, max %d µs: want every value in [0, %d µs)", ph.name, ph.s.Min, ph.s.Mean, ph.s.Max, ph.below)
		}
	}
	if r.TLSHandshakeResumedUs != nil || r.Handshakes.Resumed != 0 || r.Handshakes.Full != conns {
		t.Errorf("handshakes %+v, resumed phase %+v: want %d full, none resumed", r.Handshakes, r.TLSHandshakeResumedUs, conns)
	}
	if r.Latency != nil && r.TTFBUs != nil && r.TTFBUs.Max > r.Latency.Max {
		t.Errorf("ttfb max %d µs > latency max %d µs: a first byte cannot come after the last", r.TTFBUs.Max, r.Latency.Max)
	}
}
