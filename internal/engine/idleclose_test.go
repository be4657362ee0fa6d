package engine

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// idleCloseServer is a framing-level HTTP/1.1 server over TLS on
// 127.0.0.1 that closes every keep-alive connection idle for idle (as
// servers' keep-alive timeouts do; a fresh connection's first request too)
// and counts the requests it answered (each once read whole).
type idleCloseServer struct {
	url      string
	ca       []byte
	answered atomic.Int64
	closed   atomic.Int64 // connections it closed for idleness
}

func newIdleCloseServer(t *testing.T, idle time.Duration) *idleCloseServer {
	t.Helper()
	s := &idleCloseServer{}
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	s.url, s.ca = serveTLS(t, nil, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			// Wait at most idle for the next request's first byte.
			_ = c.SetReadDeadline(time.Now().Add(idle))
			if _, err := br.Peek(1); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					s.closed.Add(1)
				}
				return
			}
			_ = c.SetReadDeadline(time.Time{})
			for { // the request head ends with an empty line
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if len(line) <= 2 {
					break
				}
			}
			// Counted before the write, as an access log line is
			// due: the client may finish before this goroutine
			// runs again.
			s.answered.Add(1)
			if _, err := c.Write(resp); err != nil {
				return
			}
		}
	})
	s.url += "/"
	return s
}

// runCounted runs e from shortly after now and returns its result and the
// sum of its intervals' counts.
func runCounted(t *testing.T, e *Engine) (Result, measure.Counts) {
	t.Helper()
	if _, err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total measure.Counts
	res, err := e.Run(context.Background(), time.Now().Add(20*time.Millisecond), func(iv Interval) { total.Add(&iv.Counts) })
	if err != nil {
		t.Fatal(err)
	}
	return res, total
}

// checkExact asserts zero errors, issued = requests + in flight, and that
// the server answered each counted request once (and none twice).
func checkExact(t *testing.T, s *idleCloseServer, res Result, total measure.Counts) {
	t.Helper()
	if n := total.ErrorTotal(); n != 0 {
		t.Errorf("%d errors: %v", n, total.ErrorMap())
	}
	if got := total.Requests + total.ErrorTotal() + res.InFlight; got != res.Issued {
		t.Errorf("requests %d + errors %d + in flight %d = %d, want issued %d", total.Requests, total.ErrorTotal(), res.InFlight, got, res.Issued)
	}
	// A request in flight at the window's end may or may not have been
	// answered; every other one was, once.
	if got := s.answered.Load(); got < total.Requests || got > total.Requests+res.InFlight {
		t.Errorf("server answered %d; engine counted %d + %d in flight (issued %d)", got, total.Requests, res.InFlight, res.Issued)
	}
	if s.closed.Load() == 0 {
		t.Errorf("the server closed no idle connection: the test did not test")
	}
}

// TestIdleCloseOpenLoop: open loop with far more connections than the
// rate keeps busy (each idle about 1 s between requests) against a server
// that closes connections idle for 300 ms: no request fails, each is
// counted once, and the server answered exactly what the engine counts.
// The closed connections are reopened (reconnects).
func TestIdleCloseOpenLoop(t *testing.T) {
	s := newIdleCloseServer(t, 300*time.Millisecond)
	e := newEngine(t, plan.Plan{URL: s.url, Connections: 20, Load: plan.OpenLoop, Rate: 20, Duration: 2 * time.Second, TLS: plan.TLS{CAPEM: s.ca}}, 20)
	res, total := runCounted(t, e)
	checkExact(t, s, res, total)
	if total.Reconnects == 0 {
		t.Errorf("no reconnect after the server's idle closes")
	}
	t.Logf("issued %d, answered %d, reconnects %d, retries %d, idle closes %d", res.Issued, s.answered.Load(), total.Reconnects, total.Retries, s.closed.Load())
}

// TestIdleCloseClosedLoopRamp: a closed-loop connection ramp whose later
// slots, prepared at the start, are first used after the server's 300 ms
// idle timeout closed them: no slot loses its first request.
func TestIdleCloseClosedLoopRamp(t *testing.T) {
	s := newIdleCloseServer(t, 300*time.Millisecond)
	p := plan.Plan{URL: s.url, Connections: 2, TLS: plan.TLS{CAPEM: s.ca}, Interval: 200 * time.Millisecond,
		Stages: []plan.Stage{{Duration: 400 * time.Millisecond, Connections: 2}, {Duration: 600 * time.Millisecond, Connections: 6}, {Duration: 200 * time.Millisecond, Connections: 6}}}
	e := newEngine(t, p, 2)
	res, total := runCounted(t, e)
	checkExact(t, s, res, total)
	if total.Reconnects < 4 {
		t.Errorf("%d reconnects, want at least 4 (one per slot activated after the idle timeout)", total.Reconnects)
	}
	t.Logf("issued %d, reconnects %d, retries %d, idle closes %d", res.Issued, total.Reconnects, total.Retries, s.closed.Load())
}

// TestIdleCloseResend: with the look before reuse disabled, a request
// written on a connection the server closed while idle meets its close
// (EPIPE, a reset, or an end of file before any byte) and is resent once
// on a new connection: no error, each request counted once, one retry per
// stale connection used.
func TestIdleCloseResend(t *testing.T) {
	for _, load := range []plan.Load{plan.OpenLoop, plan.ClosedLoop} {
		t.Run(load.String(), func(t *testing.T) {
			s := newIdleCloseServer(t, 300*time.Millisecond)
			p := plan.Plan{URL: s.url, Connections: 8, Load: load, Rate: 10, Duration: 1500 * time.Millisecond, TLS: plan.TLS{CAPEM: s.ca}}
			if load == plan.ClosedLoop {
				p.Rate = 0
				p.Connections = 2
				p.Stages = []plan.Stage{{Duration: 500 * time.Millisecond, Connections: 2}, {Duration: 400 * time.Millisecond, Connections: 6}, {Duration: 200 * time.Millisecond, Connections: 6}}
				p.Duration = 0
				p.Interval = 100 * time.Millisecond
			}
			e := newEngine(t, p, p.Connections)
			e.noIdleLook = true
			res, total := runCounted(t, e)
			checkExact(t, s, res, total)
			if total.Retries == 0 {
				t.Errorf("no retry: the stale connections were not resent on")
			}
			t.Logf("issued %d, reconnects %d, retries %d, idle closes %d", res.Issued, total.Reconnects, total.Retries, s.closed.Load())
		})
	}
}
