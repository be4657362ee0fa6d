package e2e

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
)

// TestCaseC08CoordinatedOmission: field case C08. A server that answers in
// about 1 ms froze for 5 s in the middle of a 10 s wrk test on one
// connection, and wrk printed p50 = p75 = p90 = p99 = 5.01 s, which is
// wrong whichever way latency is defined: measured from the actual send
// only one request was slow, and measured from when requests should have
// been sent about half were still fast. Another generator, whose server
// was suspended for half of a 30 s run, reported a mean of 86 ms, about a
// hundredth of what users would have waited.
//
// Here a 1 ms keep-alive TLS target stops answering from 3 s to 6 s of the
// run (every request that would finish in that span is held until 6 s), in
// two 10 s runs (the case's own length):
//
//   - A, open loop at 100 requests/s, up to 400 connections: about 1000
//     requests issued (± 1 %); latency from each request's intended send
//     time has about 700 samples near 1 ms and 300 spread evenly over 0-3 s,
//     so p50 < 10 ms, p75 = 0.5 s ± 0.1 s, p90 = 2.0 s ± 0.15 s,
//     p99 = 2.9 s ± 0.1 s and max = 3.0 s ± 0.1 s. That latency is the
//     primary one; service time, if shown, is labelled apart.
//   - B, closed loop on one connection: exactly one request takes about
//     3 s; p50 < 5 ms, p99 < 10 ms and max = 3.0 s ± 0.1 s. A p50 near the
//     max (wrk's symptom) is a failure.
//
// The target cannot see the run's start instant, so the stall is placed
// from its first arrival (the first send, within a few ms of the start).
// Both runs use a 5 s timeout: the product's default, 2 s, is shorter than
// the stall and would turn the held requests into timeouts, which is not
// what the case measures. Latency bounds get a margin for the scheduling
// delays this process measurably suffered during the run (c15StartProbe).
// Run A also checks the README's promise that, with --max-connections
// above -c, requests keep leaving on schedule while every connection is
// busy: the target must receive the stall's requests during the stall.
func TestCaseC08CoordinatedOmission(t *testing.T) {
	const (
		stallFrom = 3 * time.Second
		stallTo   = 6 * time.Second
		window    = 10 * time.Second
		service   = time.Millisecond
	)
	// start returns a target that stalls, the count of responses it held
	// back, and a function returning when the last held response was
	// written (the held responses leave in one burst when the stall ends).
	start := func(t *testing.T) (*c15Target, *atomic.Int64, func() time.Time) {
		held := new(atomic.Int64)
		var mu sync.Mutex
		var first, lastHeld time.Time
		isHeld := func(arrival time.Time) bool {
			from, to := first.Add(stallFrom), first.Add(stallTo)
			return arrival.Add(service).After(from) && arrival.Before(to)
		}
		delay := func(_ string, arrival, f time.Time) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			first = f
			if isHeld(arrival) {
				held.Add(1)
				return first.Add(stallTo).Sub(arrival)
			}
			return service
		}
		written := func(_ string, arrival, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			if isHeld(arrival) && at.After(lastHeld) {
				lastHeld = at
			}
		}
		srv := c15StartTargetNotify(t, delay, written)
		return srv, held, func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return lastHeld
		}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }

	t.Run("a_open_loop", func(t *testing.T) {
		srv, held, lastHeld := start(t)
		p := plan.Plan{
			URL: srv.URL("/"), Load: plan.OpenLoop, Rate: 100, Duration: window, Connections: 10, MaxConnections: 400,
			Timeout: 5 * time.Second, TLS: c15TLS(),
		}
		probe := c15StartProbe(t, time.Millisecond)
		run := runCase(t, p, 1, 1)
		noise := probe.Stop()
		r := run.Report
		received := srv.Received()
		first := srv.First()
		inStall := srv.Between(first.Add(stallFrom), first.Add(stallTo))
		// How long the target took to write every held response once the
		// stall ended (on an idle machine, about a millisecond).
		burst := max(lastHeld().Sub(first.Add(stallTo)), 0)
		c08Log(t, r, run.Elapsed, noise)
		t.Logf("server: received %d, held %d, arrivals during the stall %d, held responses written within %v of the stall's end; connections opened %d, missed %d", received, held.Load(), inStall, burst, r.ConnectionsOpened, r.Missed)

		if r.Issued < 990 || r.Issued > 1010 {
			t.Errorf("issued %d, want 1000 ± 1 %%", r.Issued)
		}
		if received != r.Issued {
			t.Errorf("server received %d, report issued %d: want equal", received, r.Issued)
		}
		if r.ErrorTotal() != 0 {
			t.Errorf("errors %v, want none", r.Errors)
		}
		if r.Mode != "open" || r.LatencyBasis != "intended send" {
			t.Errorf("mode %q, latency basis %q: want open, intended send (the primary latency)", r.Mode, r.LatencyBasis)
		}
		l := r.Latency
		if l == nil {
			t.Fatal("no latency samples")
		}
		if l.Count != r.Requests {
			t.Errorf("latency holds %d samples, %d completed", l.Count, r.Requests)
		}
		// A sample passes through about four wake-ups (the send timer, the
		// target's read and hold timer, the response read): margins for the
		// scheduling delays measured during the run (the median delay for
		// the medians, the 99th percentile above). The held requests all
		// complete in one burst when the stall ends; every percentile from
		// p75 up may carry the time the target took to write them all, plus
		// as long again for the client to read them.
		allow, allow50 := 4*noise.P99, 4*noise.P50
		tail := 2*burst + allow
		if d := c08Dur(l.P50); d >= 10*time.Millisecond+allow50 {
			t.Errorf("p50 = %v, want < 10 ms (+ %v for measured scheduling noise)", d, allow50)
		}
		for _, q := range []struct {
			name      string
			got       int64
			want, tol time.Duration
		}{
			{"p75", l.P75, 500 * time.Millisecond, 100 * time.Millisecond},
			{"p90", l.P90, 2000 * time.Millisecond, 150 * time.Millisecond},
			{"p99", l.P99, 2900 * time.Millisecond, 100 * time.Millisecond},
			{"max", l.Max, 3000 * time.Millisecond, 100 * time.Millisecond},
		} {
			c15Near(t, q.name+" (ms)", ms(q.got), ms(q.want.Microseconds()), ms(q.tol.Microseconds()), ms(tail.Microseconds()))
		}
		// Service time (from the actual send) is reported apart: it is the
		// uncorrected view, where the stall touches only the few requests
		// that were on the wire when it began.
		if l := r.SendLatenessUs; l == nil || l.Count < r.Requests {
			t.Errorf("open loop: send lateness %+v, want a sample per send (%d completed)", l, r.Requests)
		}
		if s := r.ServiceTimeUs; s == nil {
			t.Error("open loop: no service-time summary beside the intended-time latency")
		} else if d := c08Dur(s.P50); d >= 10*time.Millisecond+allow50 {
			t.Errorf("service time p50 = %v, want < 10 ms (+ %v for measured scheduling noise)", d, allow50)
		}
		// With up to 400 connections allowed, requests keep leaving on
		// schedule while every open connection waits on the stalled
		// server (README: "when every connection is busy, up to
		// --max-connections more are opened"): the target receives the
		// stall's 300 scheduled requests during the stall, not after it.
		// (At least 240: a new connection's handshake may push a send
		// due just before 6 s past the stall. This is the README's
		// promise rather than one of the case's results: the case accepts
		// either enough connections or intended-time latency.)
		if inStall < 240 || inStall > 310 {
			t.Errorf("server received %d requests during the 3 s stall, want about 300 (100/s on schedule, on new connections up to --max-connections 400)", inStall)
		}
	})

	t.Run("b_closed_loop", func(t *testing.T) {
		srv, held, _ := start(t)
		p := plan.Plan{URL: srv.URL("/"), Connections: 1, Duration: window, Timeout: 5 * time.Second, TLS: c15TLS()}
		probe := c15StartProbe(t, time.Millisecond)
		run := runCase(t, p, 1, 1)
		noise := probe.Stop()
		r := run.Report
		received := srv.Received()
		c08Log(t, r, run.Elapsed, noise)
		t.Logf("server: received %d, held %d", received, held.Load())

		if received != r.Issued {
			t.Errorf("server received %d, report issued %d: want equal", received, r.Issued)
		}
		if r.ErrorTotal() != 0 {
			t.Errorf("errors %v, want none", r.Errors)
		}
		if r.Mode != "closed" || r.LatencyBasis != "actual send" || r.ServiceTimeUs != nil {
			t.Errorf("mode %q, latency basis %q, service time %+v: want closed, actual send, none", r.Mode, r.LatencyBasis, r.ServiceTimeUs)
		}
		if r.SendLatenessUs != nil {
			t.Errorf("closed loop: send lateness %+v, want none (sends follow no schedule)", r.SendLatenessUs)
		}
		// One connection, one request on the wire at a time: the target
		// held exactly one request through the stall.
		if held.Load() != 1 {
			t.Errorf("target held %d requests through the stall, want exactly 1", held.Load())
		}
		l := r.Latency
		if l == nil {
			t.Fatal("no latency samples")
		}
		if l.Count != r.Requests {
			t.Errorf("latency holds %d samples, %d completed", l.Count, r.Requests)
		}
		// A sample passes through about three wake-ups (the target's read
		// and hold timer, the response read).
		if allow := 3 * noise.P50; c08Dur(l.P50) >= 5*time.Millisecond+allow {
			t.Errorf("p50 = %v, want < 5 ms (+ %v for measured scheduling noise)", c08Dur(l.P50), allow)
		}
		if allow := 3 * noise.P99; c08Dur(l.P99) >= 10*time.Millisecond+allow {
			t.Errorf("p99 = %v, want < 10 ms (+ %v for measured scheduling noise)", c08Dur(l.P99), allow)
		}
		c15Near(t, "max (ms)", ms(l.Max), 3000, 100, ms((3 * noise.Max).Microseconds()))
		if c08Dur(l.P50)*10 > c08Dur(l.Max) {
			t.Errorf("p50 = %v near max = %v: the stall must show in one sample only", c08Dur(l.P50), c08Dur(l.Max))
		}
		// Exactly one sample of 2.9 s or more: one interval (the one the
		// held request ended in) has a max that high, and its p99 is not.
		slow := 0
		for _, pt := range r.Timeline {
			if pt.MaxUs >= 2_900_000 {
				slow++
				if pt.P99Us >= 2_900_000 {
					t.Errorf("interval %d: p99 %.1f ms, want only its max above 2.9 s", pt.Index, ms(pt.P99Us))
				}
			}
		}
		if slow != 1 {
			t.Errorf("%d intervals hold a sample of 2.9 s or more, want exactly 1", slow)
		}
	})
}

// c08Dur converts a report's µs figure to a duration.
func c08Dur(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

func c08Log(t *testing.T, r *report.Report, elapsed time.Duration, noise c15Noise) {
	t.Helper()
	t.Logf("issued %d, completed %d, errors %v, in flight %d, window %.3f s, %.1f req/s, elapsed %v; %v", r.Issued, r.Requests, r.Errors, r.InFlight, r.DurationS, r.RPS, elapsed, noise)
	if l := r.Latency; l != nil {
		t.Logf("latency (%s): p50 %d p75 %d p90 %d p99 %d p99.9 %d max %d us, mean %.0f us, n=%d", r.LatencyBasis, l.P50, l.P75, l.P90, l.P99, l.P999, l.Max, l.Mean, l.Count)
	}
	for _, pt := range r.Timeline {
		t.Logf("  interval %d: %d requests, missed %d, p50 %d p99 %d max %d us", pt.Index, pt.Requests, pt.Missed, pt.P50Us, pt.P99Us, pt.MaxUs)
	}
	if r.ConnectUs != nil && r.TLSHandshakeUs != nil {
		t.Logf("connections opened %d: connect p50 %d max %d us, TLS handshake p50 %d p99 %d max %d us", r.ConnectionsOpened, r.ConnectUs.P50, r.ConnectUs.Max, r.TLSHandshakeUs.P50, r.TLSHandshakeUs.P99, r.TLSHandshakeUs.Max)
	}
	for _, a := range r.AgentRows {
		if a.Error != "" {
			t.Errorf("agent %s: %s", a.Name, a.Error)
		}
	}
	if s := r.ServiceTimeUs; s != nil {
		t.Logf("service time: p50 %d p75 %d p90 %d p99 %d max %d us, n=%d", s.P50, s.P75, s.P90, s.P99, s.Max, s.Count)
	}
}
