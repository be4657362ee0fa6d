package e2e

import (
	"bufio"
	"crypto/tls"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

// TestCaseC14InFlightAndWarmup covers field case C14. wrk dropped the
// requests still in flight when its duration ended (and, in old versions,
// an unreported calibration phase), so server logs showed far more
// requests than the tool; other tools divided by a drain-inclusive time, or
// discarded late completions silently. Against a server that always takes
// 450 ms, with 100 connections, each connection completes 4 requests in a
// 2 s window and has a 5th in flight at its end. What must hold: completed
// = 400 ± 5 and in flight = 100 ± 5; issued = 500 = the server's count;
// requests/s and transfer/s use the 2 s window (200 ± 3 req/s). With a 1 s
// warm-up first (run B), the ~200 warm-up completions are reported on
// their own and kept out of the window's counts, histogram and rate, and
// warm-up issued + window issued = the server's count. Independently of
// the schedule, each count must match the server's own timeline (what it
// wrote inside the window); the schedule-derived numbers are judged when
// the test process was not starved by other loads.
func TestCaseC14InFlightAndWarmup(t *testing.T) {
	const (
		delay  = 450 * time.Millisecond
		conns  = 100
		window = 2 * time.Second
	)
	// The histograms keep 3 significant digits: a sample of the delay
	// itself may be reported as its bucket's lowest value, up to 0.1 %
	// below it.
	delayUs := delay.Microseconds() * 999 / 1000

	t.Run("A_window", func(t *testing.T) {
		srv := c14Server(t, delay)
		watch := startSchedWatch()
		t.Cleanup(watch.stop)
		run := runCase(t, plan.Plan{URL: srv.URL("/"), Connections: conns, Duration: window}, 2, 1)
		watch.stop()
		r := run.Report
		received := srv.Stats.Requests.Load()
		ws, we := r.StartedAt, r.StartedAt.Add(window)
		lost := watch.lost(ws, we)
		t.Logf("completed %d, in flight %d, issued %d, errors %v, server received %d, window %.3f s, %.2f req/s, elapsed %v, test process stalled %.1f %% of the window; agent failures: %q",
			r.Requests, r.InFlight, r.Issued, r.Errors, received, r.DurationS, r.RPS, run.Elapsed, 100*lost, agentFailures(r))

		if r.Issued != received {
			t.Errorf("issued %d, server received %d: want equal", r.Issued, received)
		}
		c14CrossCheck(t, "completed in the window", r.Requests, srv, ws, we)
		c14Near(t, lost, "completed", r.Requests, 400, 5)
		c14Near(t, lost, "in flight at the end", r.InFlight, 100, 5)
		if r.Issued != 500 {
			c14Judge(t, lost, "issued = %d, want exactly 500 (5 sends per connection in 2 s)", r.Issued)
		}
		if r.ErrorTotal() != 0 {
			t.Errorf("errors %v, want none", r.Errors)
		}
		c14Window(t, r.DurationS, r.RPS, r.Requests, r.TransferBps, r.BytesRead, window)
		if r.RPS < 197 || r.RPS > 203 {
			c14Judge(t, lost, "requests/s = %.2f, want 200 ± 3", r.RPS)
		}
		if r.Latency == nil || r.Latency.Count != r.Requests || r.Latency.Min < delayUs {
			t.Errorf("latency %+v: want %d samples, none below the server's %v", r.Latency, r.Requests, delay)
		}
	})

	t.Run("B_warmup", func(t *testing.T) {
		const warmup = time.Second
		srv := c14Server(t, delay)
		watch := startSchedWatch()
		t.Cleanup(watch.stop)
		run := runCase(t, plan.Plan{URL: srv.URL("/"), Connections: conns, Duration: window, Warmup: warmup}, 2, 1)
		watch.stop()
		r := run.Report
		received := srv.Stats.Requests.Load()
		start := r.StartedAt
		ws, we := start.Add(warmup), start.Add(warmup+window)
		lost := watch.lost(start, we)
		if r.Warmup == nil {
			t.Fatalf("report has no warm-up section (completed %d, issued %d, server received %d)", r.Requests, r.Issued, received)
		}
		w := r.Warmup
		var warmErrs int64
		for _, n := range w.Errors {
			warmErrs += n
		}
		t.Logf("warm-up %.3f s: %d completed, errors %v; window: completed %d, in flight %d, issued %d, errors %v; server received %d; window %.3f s, %.2f req/s; test process stalled %.1f %% of the run; agent failures: %q",
			w.DurationS, w.Requests, w.Errors, r.Requests, r.InFlight, r.Issued, r.Errors, received, r.DurationS, r.RPS, 100*lost, agentFailures(r))

		if math.Abs(w.DurationS-warmup.Seconds()) > 1e-6 {
			t.Errorf("warm-up duration = %.6f s, want %v", w.DurationS, warmup)
		}
		if r.ConnectionsOpened != int64(conns) || r.TLS.Version["TLS 1.3"] != int64(conns) {
			t.Errorf("window: %d connections opened, TLS versions %v; want the %d prepared ones, at TLS 1.3, despite the warm-up", r.ConnectionsOpened, r.TLS.Version, conns)
		}
		if warmErrs != 0 || r.ErrorTotal() != 0 {
			t.Errorf("errors: warm-up %v, window %v; want none", w.Errors, r.Errors)
		}
		c14CrossCheck(t, "warm-up completed", w.Requests, srv, start, ws)
		c14CrossCheck(t, "window completed", r.Requests, srv, ws, we)
		c14Near(t, lost, "warm-up completed", w.Requests, 200, 5)
		c14Near(t, lost, "window completed", r.Requests, 400, 5)
		c14Near(t, lost, "window in flight at the end", r.InFlight, 100, 5)
		c14Near(t, lost, "window issued", r.Issued, 500, 5)
		// The request sent at 0.9 s that ends at 1.35 s belongs to the
		// window (it is issued there); warm-up issued is what ended in it.
		if got := w.Requests + warmErrs + r.Issued; got != received {
			t.Errorf("warm-up issued %d + window issued %d = %d, server received %d", w.Requests+warmErrs, r.Issued, got, received)
		}
		c14Window(t, r.DurationS, r.RPS, r.Requests, r.TransferBps, r.BytesRead, window)
		if r.RPS < 197 || r.RPS > 203 {
			c14Judge(t, lost, "requests/s = %.2f, want 200 ± 3 (warm-up completions excluded)", r.RPS)
		}
		if r.Latency == nil || r.Latency.Count != r.Requests {
			t.Errorf("latency histogram %+v: want exactly the %d window completions (warm-up excluded)", r.Latency, r.Requests)
		}
		if r.Status["200"] != r.Requests {
			t.Errorf("status %v: want the %d window completions only", r.Status, r.Requests)
		}
	})
}

// c14Srv is a server that answers every request after a fixed delay and
// keeps the instant each response was written.
type c14Srv struct {
	*rawServer
	mu      sync.Mutex
	written []time.Time
}

// between counts the responses written in [from, to).
func (s *c14Srv) between(from, to time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, w := range s.written {
		if !w.Before(from) && w.Before(to) {
			n++
		}
	}
	return n
}

// c14Server answers every request after delay with a small 200.
func c14Server(t *testing.T, delay time.Duration) *c14Srv {
	t.Helper()
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")
	quit := make(chan struct{})
	out := &c14Srv{}
	out.rawServer = startRaw(t, &tls.Config{}, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
		for {
			if _, _, err := readRequest(br, st); err != nil {
				return
			}
			timer := time.NewTimer(delay)
			select {
			case <-timer.C:
			case <-quit:
				timer.Stop()
				return
			}
			if _, err := c.Write(resp); err != nil {
				return
			}
			out.mu.Lock()
			out.written = append(out.written, time.Now())
			out.mu.Unlock()
		}
	})
	t.Cleanup(func() { close(quit) }) // runs before the server's Close
	return out
}

// c14Slack is how late a client may read a response the server wrote
// before an instant, or how early, on a busy machine.
const c14Slack = 100 * time.Millisecond

// c14CrossCheck compares the tool's completions in [from, to) with the
// server's timeline: every response written well inside the span must be
// counted in it, and none written outside it.
func c14CrossCheck(t *testing.T, what string, got int64, srv *c14Srv, from, to time.Time) {
	t.Helper()
	sure := srv.between(from, to.Add(-c14Slack))
	possible := srv.between(from.Add(-c14Slack), to)
	if got < sure || got > possible {
		t.Errorf("%s = %d, but the server wrote %d responses well inside it and %d around it: want %d to %d", what, got, sure, possible, sure, possible)
	}
}

// c14Judge reports a timing-derived expectation: an error, or a log line
// when the test process was stalled too often to keep the 450 ms schedule.
func c14Judge(t *testing.T, lost float64, format string, args ...any) {
	t.Helper()
	if lost < 0.01 {
		t.Errorf(format, args...)
		return
	}
	t.Logf(format+" (not judged: the test process stalled %.1f %% of the run)", append(args, 100*lost)...)
}

func c14Near(t *testing.T, lost float64, what string, got, want, tol int64) {
	t.Helper()
	if got < want-tol || got > want+tol {
		c14Judge(t, lost, "%s = %d, want %d ± %d", what, got, want, tol)
	}
}

// c14Window checks that rates use the measurement window, and only it.
func c14Window(t *testing.T, durationS, rps float64, requests int64, transferBps float64, bytesRead int64, window time.Duration) {
	t.Helper()
	if math.Abs(durationS-window.Seconds()) > 0.005 {
		t.Errorf("window = %.4f s, want %v", durationS, window)
	}
	if want := float64(requests) / window.Seconds(); math.Abs(rps-want) > 0.01*want+1e-9 {
		t.Errorf("requests/s = %.3f, want completed in window / window = %d / %v = %.3f", rps, requests, window, want)
	}
	if want := float64(bytesRead) / window.Seconds(); math.Abs(transferBps-want) > 0.01*want+1e-9 {
		t.Errorf("transfer/s = %.1f, want bytes read / window = %d / %v = %.1f", transferBps, bytesRead, window, want)
	}
	if bytesRead <= 0 {
		t.Errorf("bytes read = %d, want the window's response bytes", bytesRead)
	}
}
