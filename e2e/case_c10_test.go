package e2e

import (
	"bufio"
	"crypto/tls"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
)

// TestCaseC10TimeoutAccounting: field case C10. A load tool counted a
// response slower than --timeout both as a timeout and as a completed
// request with a status, dropped its latency, and printed 0.00us latencies;
// another reported timeouts for requests that never reached the server.
// What must hold: a request that does not end within the timeout (measured
// to its last body byte) is exactly one timeout error, never a success or a
// status, and is abandoned at the timeout on a connection that is then
// closed, never reused; successes keep real latencies below the timeout; a
// run with no success says "no request completed" instead of zeros, with a sane
// elapsed time. Part (c) (deadline from the scheduled send under open-loop
// overload) needs a rate-paced mode, which does not exist yet.
func TestCaseC10TimeoutAccounting(t *testing.T) {
	okResp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n0123456789")

	t.Run("a_every_10th_slow", func(t *testing.T) {
		// Over plain HTTP, as the case does not ask for TLS: a request
		// that reopens its connection after a timeout then carries only a
		// TCP connect, which keeps the p99 bound about the server.
		s := c10Start(t, nil, func(n int64) bool { return n%10 == 0 }, false, 300*time.Millisecond, okResp)
		const n = 2000
		run := runCase(t, plan.Plan{URL: s.srv.URL("/"), Connections: 10, Requests: n, Timeout: 100 * time.Millisecond, Duration: 20 * time.Second}, 1, 2)
		r := run.Report
		defer fcDumpOnFailure(t, r)

		fcWant(t, "completed", r.Requests, 1800)
		fcWant(t, "issued", r.Issued, n)
		fcWantMap(t, "errors", r.Errors, map[string]int64{"timeout": 200})
		fcWantMap(t, "status (a late 200 is not a success)", r.Status, map[string]int64{"200": 1800})
		fcWant(t, "bytes read (successes only)", r.BytesRead, 1800*int64(len(okResp)))
		s.checkAbandoned(t, 200, 100*time.Millisecond)
		c10CheckReconnects(t, s, r.ConnectionsOpened, r.Reconnects, 10, 200)
		fcLatencyComplete(t, r)
		if l := r.Latency; l != nil {
			if l.P99 >= 20_000 {
				t.Errorf("success latency p99 = %dus, want < 20ms", l.P99)
			}
			if l.Max >= 100_000 {
				t.Errorf("success latency max = %dus, want < 100ms (a slower response is a timeout)", l.Max)
			}
		}
		fcWantRates(t, r)
	})

	t.Run("b_every_request_slow", func(t *testing.T) {
		s := c10Start(t, nil, func(int64) bool { return true }, false, 300*time.Millisecond, okResp)
		const n = 200
		run := runCase(t, plan.Plan{URL: s.srv.URL("/"), Connections: 10, Requests: n, Timeout: 100 * time.Millisecond, Duration: 20 * time.Second}, 1, 2)
		r := run.Report
		defer fcDumpOnFailure(t, r)

		fcWant(t, "completed", r.Requests, 0)
		fcWant(t, "issued", r.Issued, n)
		fcWantMap(t, "errors", r.Errors, map[string]int64{"timeout": n})
		fcWantMap(t, "status", r.Status, nil)
		fcWant(t, "bytes read", r.BytesRead, 0)
		s.checkAbandoned(t, n, 100*time.Millisecond)
		if r.RPS != 0 {
			t.Errorf("requests/s = %v, want 0", r.RPS)
		}
		if r.Latency != nil || r.TTFBUs != nil {
			t.Errorf("latency = %+v, ttfb = %+v; want no samples", r.Latency, r.TTFBUs)
		}
		// 20 sequential 100 ms timeouts per connection.
		if r.DurationS < 1.5 || r.DurationS > 2.5 {
			t.Errorf("window = %.3fs, want 2 s ± 0.5 s", r.DurationS)
		}
		var b strings.Builder
		if err := r.WriteText(&b, report.TextOptions{Latency: true}); err != nil {
			t.Fatal(err)
		}
		text := b.String()
		if !strings.Contains(text, "no request completed") || strings.Contains(text, "50%") {
			t.Errorf("text report does not say \"no request completed\" or prints a percentile table:\n%s", text)
		}
		// No zero, NaN, sentinel or negative: an unknown figure is a lone "-"
		// (as for a dead agent's start), never a number.
		negative := regexp.MustCompile(`-\d`)
		for _, line := range strings.Split(text, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "Latency") {
				continue
			}
			for _, bad := range []string{"NaN", "nan", "Inf", "0.00us"} {
				if strings.Contains(line, bad) {
					t.Errorf("latency line %q contains %q", line, bad)
				}
			}
			if negative.MatchString(line) {
				t.Errorf("latency line %q has a negative figure", line)
			}
		}
		if !strings.Contains(text, "0 requests in 2.") && !strings.Contains(text, "0 requests in 1.") {
			t.Errorf("text report does not state 0 requests in about 2 s:\n%s", text)
		}
	})

	t.Run("body_late_tls", func(t *testing.T) {
		// Same fault, subtler: the slow responses send their status line,
		// headers and half the body at once and the rest only after the
		// hold. The timeout runs to the last body byte, so they are timeouts
		// too (not successes, not truncations). Over TLS, with a 400 ms
		// timeout (a reopened connection's handshake counts against it, and
		// a loaded 2-core machine needs room for that).
		const timeout = 400 * time.Millisecond
		s := c10Start(t, fcHandshakeHeavyTLS(), func(n int64) bool { return n%10 == 0 }, true, 3*timeout, okResp)
		const n = 500
		run := runCase(t, plan.Plan{URL: s.srv.URL("/"), Connections: 10, Requests: n, Timeout: timeout, Duration: 20 * time.Second}, 1, 2)
		r := run.Report
		defer fcDumpOnFailure(t, r)

		fcWant(t, "completed", r.Requests, 450)
		fcWant(t, "issued", r.Issued, n)
		fcWantMap(t, "errors", r.Errors, map[string]int64{"timeout": 50})
		fcWantMap(t, "status", r.Status, map[string]int64{"200": 450})
		fcWant(t, "bytes read (successes only)", r.BytesRead, 450*int64(len(okResp)))
		s.checkAbandoned(t, 50, timeout)
		c10CheckReconnects(t, s, r.ConnectionsOpened, r.Reconnects, 10, 50)
		fcLatencyComplete(t, r)
		if l := r.Latency; l != nil && l.Max > timeout.Microseconds()*1001/1000 {
			t.Errorf("success latency max = %dus, want <= the %v timeout", l.Max, timeout)
		}
		fcWantRates(t, r)
	})

	// (c) Open-loop overload: 300 requests/s offered to a server that
	// serves one request at a time in 10 ms (100/s). With the deadline
	// running from each request's intended send time, overload must show:
	// at least half the scheduled requests end as timeouts, and no success
	// is recorded above the timeout (plus 50 ms of slack). Scaled from 20 s
	// to 6 s.
	t.Run("c_open_loop_overload", func(t *testing.T) {
		var mu sync.Mutex // serial: one request at a time across connections
		srv := startRaw(t, &tls.Config{}, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
			for {
				if _, _, err := readRequest(br, st); err != nil {
					return
				}
				mu.Lock()
				time.Sleep(10 * time.Millisecond)
				mu.Unlock()
				if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")); err != nil {
					return
				}
			}
		})
		run := runCase(t, plan.Plan{
			URL: srv.URL("/"), Load: plan.OpenLoop, Rate: 300, Connections: 64, Duration: 6 * time.Second, Timeout: time.Second,
		}, 1, 1)
		r := run.Report
		scheduled := int64(300 * 6)
		timeouts := r.Errors["timeout"]
		unsent := scheduled - r.Issued // due, but every connection was busy until the end
		if r.Issued > scheduled || r.Missed < unsent {
			t.Errorf("issued %d, missed %d: each of the %d scheduled requests must be issued or counted missed", r.Issued, r.Missed, scheduled)
		}
		if 2*(timeouts+unsent) < scheduled {
			t.Errorf("timeouts %d + unsent %d of %d scheduled: overload at 3x capacity must fail at least half by deadline", timeouts, unsent, scheduled)
		}
		if r.Latency != nil && r.Latency.Max > (time.Second+50*time.Millisecond).Microseconds() {
			t.Errorf("a success took %d us, above the 1 s timeout", r.Latency.Max)
		}
		// The server's 100/s also serves requests whose clients gave up (it
		// cannot know), so successes are at most its capacity.
		if rps := r.RPS; rps > 110 || rps <= 0 {
			t.Errorf("achieved %.1f successes/s, want above 0 and at most the server's 100/s (+10 %%)", rps)
		}
		// Sends waited for a connection the slow server held: their
		// lateness is in its own histogram, but it is the server's
		// backlog, not the client's: the run is server-bound.
		if l := r.SendLatenessUs; l == nil || l.P99 <= report.LatenessLimit.Microseconds() {
			t.Errorf("send lateness %+v: want a p99 above %v at 3x the server's capacity", l, report.LatenessLimit)
		}
		if r.Backlogged < r.Unsent || 10*r.Backlogged < 9*r.Missed {
			t.Errorf("backlogged %d of %d missed (%d unsent): at least 90 %% of the sends waited for the server's connections", r.Backlogged, r.Missed, r.Unsent)
		}
		if r.Queued < r.Backlogged-r.Unsent {
			t.Errorf("queued %d: want at least the %d sent backlogged sends (each waited for a connection)", r.Queued, r.Backlogged-r.Unsent)
		}
		// Server-bound, unless this in-process agent (sharing the test's
		// process and, on a loaded machine, its CPUs) was itself late by
		// more than 1 % of the sends: then client-bound for that alone.
		ownLate := len(r.ClientBoundReasons) == 1 && (strings.Contains(r.ClientBoundReasons[0], "by the agents' own scheduling") ||
			strings.Contains(r.ClientBoundReasons[0], "late by the agents' own delay"))
		if ownLate && r.ClientLate == 0 {
			t.Errorf("client-bound reasons %q with no client-late send: the backlog's lateness blamed on the client", r.ClientBoundReasons)
		}
		// Under the race detector the in-process agent's CPU figure is
		// this whole process's (the test's TLS server's 64 handshakes
		// included, several times slower with the detector): alone on a
		// quiet machine it read 99-154 % of the agent's one CPU, and the
		// verdict says client-bound for that. The server-bound verdict is
		// judged without the detector (make test-cases, in CI).
		raceBusy := c15RaceEnabled() && len(r.ClientBoundReasons) > 0 &&
			!slices.ContainsFunc(r.ClientBoundReasons, func(s string) bool { return !strings.Contains(s, "'s CPUs were ") })
		if raceBusy {
			t.Logf("server-bound not judged under the race detector: client-bound %q (make test-cases judges it)", r.ClientBoundReasons)
		}
		if !r.ServerBound && !ownLate && !raceBusy {
			t.Errorf("client-bound reasons %q, server-bound %v %q: want server-bound", r.ClientBoundReasons, r.ServerBound, r.ServerBoundReasons)
		}
		t.Logf("missed %d, backlogged %d, unsent %d; server-bound %v %q; client-bound %q", r.Missed, r.Backlogged, r.Unsent, r.ServerBound, r.ServerBoundReasons, r.ClientBoundReasons)
		if r.Mode != "open" || r.LatencyBasis != "intended send" {
			t.Errorf("mode %q, basis %q", r.Mode, r.LatencyBasis)
		}
	})
}

// c10Server answers 200 in about 1 ms, except requests for which slow(n)
// holds (n counts requests across connections from 1): those are held for
// hold, during which the server watches whether the client abandons the
// connection. With partial set, the slow response's head and half its body
// go out at once and the rest only after the hold.
type c10Server struct {
	srv                               *rawServer
	slowSeen, abandoned, late, reused atomic.Int64
	mu                                sync.Mutex
	abandonAfter                      []time.Duration
}

func c10Start(t *testing.T, cfg *tls.Config, slow func(n int64) bool, partial bool, hold time.Duration, resp []byte) *c10Server {
	s := &c10Server{}
	var count atomic.Int64
	s.srv = startRaw(t, cfg, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
		for {
			if _, _, err := readRequest(br, st); err != nil {
				return
			}
			if !slow(count.Add(1)) {
				time.Sleep(time.Millisecond)
				if _, err := c.Write(resp); err != nil {
					return
				}
				continue
			}
			s.slowSeen.Add(1)
			rest := resp
			if partial {
				cut := len(resp) - 5
				if _, err := c.Write(resp[:cut]); err != nil {
					return
				}
				rest = resp[cut:]
			}
			elapsed, closed, sent := fcAwaitClose(c, br, hold)
			switch {
			case sent:
				s.reused.Add(1) // the client wrote on a connection it should have dropped
				return
			case closed:
				s.abandoned.Add(1)
				s.mu.Lock()
				s.abandonAfter = append(s.abandonAfter, elapsed)
				s.mu.Unlock()
				return
			}
			s.late.Add(1) // the client still waits after the hold: answer late
			if _, err := c.Write(rest); err != nil {
				return
			}
		}
	})
	return s
}

// checkAbandoned checks that the client dropped every slow request's
// connection at about the timeout, well before the late answer, and never
// sent on it again.
func (s *c10Server) checkAbandoned(t *testing.T, want int64, timeout time.Duration) {
	t.Helper()
	fcWant(t, "server: slow requests", s.slowSeen.Load(), want)
	fcWant(t, "server: slow requests whose connection the client closed", s.abandoned.Load(), want)
	fcWant(t, "server: slow requests still awaited after the hold", s.late.Load(), 0)
	fcWant(t, "server: connections reused after a timeout", s.reused.Load(), 0)
	s.mu.Lock()
	d := slices.Clone(s.abandonAfter)
	s.mu.Unlock()
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	// Measured from the server's read of the request, which comes after
	// the client's timer started (at its write, or at the connect for a
	// request that opened its connection): about the timeout. (None came
	// after the hold: that is the "still awaited" count above.)
	if med := d[len(d)/2]; med < timeout/2 || med > timeout*2 {
		t.Errorf("client closed slow requests' connections after median %v (min %v, max %v); want about %v (the timeout)", med, d[0], d[len(d)-1], timeout)
	}
}

// c10CheckReconnects: every connection beyond the prepared ones is a
// reopen after a timeout, and every timeout is followed by one unless it was
// its connection slot's last request (so at most `slots` fewer).
func c10CheckReconnects(t *testing.T, s *c10Server, opened, reconnects, slots, timeouts int64) {
	t.Helper()
	fcWant(t, "connections opened", opened, slots+reconnects)
	fcWant(t, "server: connections accepted", s.srv.Stats.Accepted.Load(), opened)
	if reconnects < timeouts-slots || reconnects > timeouts {
		t.Errorf("reconnects = %d, want %d to %d (one per timeout, but none after a slot's last request)", reconnects, timeouts-slots, timeouts)
	}
}
