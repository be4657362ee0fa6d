package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
)

// TestCaseC17PercentileInvariants covers field case C17. An early vegeta
// report over 15,000 requests gave mean 5.28 ms with p99 = max = 3 s,
// which cannot be: if 1 % took 3 s the mean is at least 30 ms; locust and
// sysbench printed percentiles out of order or outside [min, max].
//
// (a), open loop at the case's 500/s, in count mode: 5,000 requests (10 s
// instead of 30) over up to 128 connections; the server delays every 50th
// request it receives
// 3 s and answers the others in 2 ms. The merged report must give p50 ≈
// 2 ms (loopback TLS may add up to 1 ms), p90 just above 2 ms, p99 = p99.9
// = max = 3.0 s ± 50 ms, mean = 61.96 ms ± 4 ms, and min ≤ p50 ≤ … ≤ max.
//
// (b): one request to a 240 ms server: min = p50 = p99 = p99.9 = max =
// 240 ms ± 1 ms (or what a plain Go client, probed around the run, saw the
// machine add, + 0.3 ms), the upper bound judged on the best of three
// attempts.
func TestCaseC17PercentileInvariants(t *testing.T) {
	t.Run("a_one_in_fifty_slow", func(t *testing.T) {
		const (
			total = 5000 // at the case's 500/s: 10 s instead of 30
			every = 50
			slow  = 3 * time.Second
			fast  = 2 * time.Millisecond
		)
		var holds c17Holds
		srv := c17Server(t, func(n int64) time.Duration {
			if n%every == 0 {
				return slow
			}
			return fast
		}, nil, &holds)
		watch := startSchedWatch()
		t.Cleanup(watch.stop)
		run := runCase(t, plan.Plan{
			URL: srv.URL("/"), Connections: 128, Load: plan.OpenLoop, Rate: 500, Requests: total, Timeout: 10 * time.Second,
		}, 2, 1)
		watch.stop()
		r := run.Report
		l := r.Latency
		lost := watch.lost(r.StartedAt, r.StartedAt.Add(time.Duration(r.DurationS*float64(time.Second))))
		t.Logf("completed %d, errors %v, in flight %d, server received %d, elapsed %v, test process stalled %.1f %% of the window; latency µs %+v; agent failures: %q; client-bound %v %q",
			r.Requests, r.Errors, r.InFlight, srv.Stats.Requests.Load(), run.Elapsed, 100*lost, l, agentFailures(r), r.ClientBound, r.ClientBoundReasons)
		if r.Requests != total || r.ErrorTotal() != 0 || r.Status["200"] != total {
			t.Fatalf("completed %d, errors %v, status %v: want %d responses 200", r.Requests, r.Errors, r.Status, total)
		}
		if got := srv.Stats.Requests.Load(); got != total {
			t.Errorf("server received %d, want %d", got, total)
		}
		if l == nil || l.Count != total {
			t.Fatalf("latency %+v: want %d samples", l, total)
		}
		c17Ordered(t, l)
		ms := func(v float64) int64 { return int64(v * 1000) }
		// Lower bounds hold however busy the machine is: 2 % of the
		// requests take 3 s, the rest 2 ms.
		if l.P50 < ms(1.5) {
			t.Errorf("p50 = %d µs, want 2 ms ± 0.5 ms", l.P50)
		}
		if l.P90 >= ms(2950) {
			t.Errorf("p90 = %d µs: only 2 %% of requests are slow", l.P90)
		}
		for _, q := range []struct {
			name string
			v    int64
		}{{"p99", l.P99}, {"p99.9", l.P999}, {"max", l.Max}} {
			if q.v < ms(2950) {
				t.Errorf("%s = %d µs, want 3.0 s ± 50 ms (2 %% of requests take 3 s)", q.name, q.v)
			}
		}
		// (4,900 × 2 ms + 100 × 3000 ms) / 5,000 = 61.96 ms.
		const wantMean = 61960.0
		if l.Mean < wantMean-4000 {
			t.Errorf("mean = %.0f µs, want 61.96 ms ± 4 ms: 100 of 5,000 requests took 3 s", l.Mean)
		}
		// Upper bounds: a machine too busy to run the test adds queueing
		// to every request; they are judged when the test process ran
		// without stalls.
		var over []string
		// The server's own 2 ms sleep overshoots by up to about 1 ms (Go
		// timers on this kind of VM), and loopback TLS adds about 0.5 ms.
		// A host whose hypervisor delays every wake-up by more breaks
		// that premise for the server and the agent alike: the server's
		// real holds of its sleep tell.
		srv50, srv90 := holds.quantile(0.5), holds.quantile(0.9)
		timersLate := srv90 > fast+1500*time.Microsecond
		t.Logf("server's real hold of its 2 ms sleep: p50 %v, p90 %v", srv50, srv90)
		if l.P50 > ms(3.5) {
			over = append(over, fmt.Sprintf("p50 = %d µs, want 2 ms (+1.5 ms for the server's timer and loopback TLS)", l.P50))
		}
		if l.P90 > ms(4.5) {
			over = append(over, fmt.Sprintf("p90 = %d µs, want ≤ 3 ms (+1.5 ms for the server's timer and loopback TLS)", l.P90))
		}
		for _, q := range []struct {
			name string
			v    int64
		}{{"p99", l.P99}, {"p99.9", l.P999}, {"max", l.Max}} {
			if q.v > ms(3050) {
				over = append(over, fmt.Sprintf("%s = %d µs, want 3.0 s ± 50 ms", q.name, q.v))
			}
		}
		if l.Mean > wantMean+4000 {
			over = append(over, fmt.Sprintf("mean = %.0f µs, want 61.96 ms ± 4 ms", l.Mean))
		}
		for _, msg := range over {
			switch {
			case lost >= 0.01:
				t.Logf("%s (not judged: the test process stalled %.1f %% of the window)", msg, 100*lost)
			case r.ClientBound:
				// The agents measured their own sends late (or their CPUs
				// busy) and the report says so: its upper percentiles are
				// the loaded machine's, as it warns.
				t.Logf("%s (not judged: the report flagged the run client-bound: %q; send lateness µs %+v)", msg, r.ClientBoundReasons, r.SendLatenessUs)
			case timersLate:
				t.Logf("%s (not judged: the host's timers were late, the server's 2 ms sleep held %v at p90)", msg, srv90)
			default:
				t.Error(msg)
			}
		}
	})

	t.Run("b_single_request", func(t *testing.T) {
		const delay = 240 * time.Millisecond
		// Requests reach this server one at a time (the probes and the
		// run's one request in turn): each hold is the server's request
		// read to its response's write, by request number.
		var mu sync.Mutex
		holds := map[int64]*c17Hold{}
		srv := c17Server(t, func(n int64) time.Duration {
			mu.Lock()
			holds[n] = &c17Hold{read: time.Now()}
			mu.Unlock()
			return delay
		}, func(n int64) {
			mu.Lock()
			holds[n].written = time.Now()
			mu.Unlock()
		}, nil)
		// hold returns request n's hold: written just before the response,
		// so it is set once the client has read.
		hold := func(n int64) c17Hold {
			mu.Lock()
			defer mu.Unlock()
			h, ok := holds[n]
			if !ok || h.written.IsZero() {
				t.Fatalf("server: no response written for request %d", n)
			}
			return *h
		}
		var sent int64
		// A plain Go TLS client's excess over the server's hold, just
		// before and just after the run, is what this machine adds to one
		// request now (loopback, two wake-ups of an idle process): the
		// tool may add that and 0.3 ms, or 1 ms, whichever is more.
		probe := func() time.Duration {
			t.Helper()
			d := c17Probe(t, srv)
			sent++
			h := hold(sent)
			excess := d - max(delay, h.written.Sub(h.read))
			t.Logf("plain client probe: %v, server held %v: excess %v", d, h.written.Sub(h.read), excess)
			return excess
		}
		// One sample on a shared machine: a wake-up of the client delayed
		// once by other work in the process (a GC cycle, the cluster's own
		// traffic) puts it over the bound, a systematic error in every
		// attempt. The upper bound is judged on up to three attempts, and
		// one within it passes; the lower bound and the order of the
		// percentiles are judged on each.
		const attempts = 3
		for attempt := 1; attempt <= attempts; attempt++ {
			over := c17SingleAttempt(t, delay, probe, func() c17Hold { sent++; return hold(sent) }, srv)
			if len(over) == 0 {
				return
			}
			for _, msg := range over {
				if attempt == attempts {
					t.Error(msg)
				} else {
					t.Logf("attempt %d of %d: %s (trying again)", attempt, attempts, msg)
				}
			}
		}
	})
}

// c17SingleAttempt runs one single-request plan against srv (whose server
// holds each request delay), between two pairs of plain-client probes,
// reports the lower bound and the order as errors, and returns what
// exceeded the upper bound (not judged when the test process stalled).
func c17SingleAttempt(t *testing.T, delay time.Duration, probe func() time.Duration, next func() c17Hold, srv *rawServer) (over []string) {
	t.Helper()
	envExcess := max(probe(), probe())
	watch := startSchedWatch()
	defer watch.stop()
	run := runCase(t, plan.Plan{URL: srv.URL("/"), Connections: 1, Requests: 1}, 1, 1)
	watch.stop()
	h := next()
	envExcess = max(envExcess, probe(), probe())
	r := run.Report
	l := r.Latency
	read, written := h.read, h.written
	serverHeld := written.Sub(read)
	t.Logf("completed %d, errors %v, server held the request %v; latency µs %+v", r.Requests, r.Errors, serverHeld, l)
	if r.Requests != 1 || r.ErrorTotal() != 0 || l == nil || l.Count != 1 {
		t.Fatalf("completed %d, errors %v, latency %+v: want one sample", r.Requests, r.Errors, l)
	}
	c17Ordered(t, l)
	// 240 ms ± 1 ms; when the machine made the server's own timer late,
	// the truth is what the server held, and the tool must report that
	// (+1 ms for loopback and the report's 128 µs histogram bucket at
	// 240 ms, or what a plain client saw this machine add + 0.3 ms).
	lo := delay.Microseconds() - 1000
	slack := max(time.Millisecond, envExcess+300*time.Microsecond)
	hi := (max(delay, serverHeld) + slack).Microseconds()
	if c15RaceEnabled() {
		// The race detector slows the client's read path by a
		// millisecond or more; the 1 ms bound is judged without it
		// (make test-cases, in CI).
		hi += 4000
	}
	// The bound is 1 ms: a stall of the test process (where client and
	// server run) of 2 ms or more around the request voids it. The
	// watch ticks every 5 ms and Go timers wake about 1 ms late, so a
	// 7 ms gap between ticks is a stall of 2 ms.
	busy := watch.stalled(read.Add(-5*time.Millisecond), written.Add(5*time.Millisecond), 7*time.Millisecond)
	for _, q := range []struct {
		name string
		v    float64
	}{{"min", float64(l.Min)}, {"p50", float64(l.P50)}, {"p99", float64(l.P99)}, {"p99.9", float64(l.P999)}, {"max", float64(l.Max)}, {"mean", l.Mean}} {
		switch {
		case q.v < float64(lo):
			t.Errorf("%s = %.0f µs, want 240 ms ± 1 ms", q.name, q.v)
		case q.v > float64(hi) && busy:
			t.Logf("%s = %.0f µs, want ≤ %d µs (not judged: the test process stalled 2 ms or more during the request)", q.name, q.v, hi)
		case q.v > float64(hi):
			over = append(over, fmt.Sprintf("%s = %.0f µs, want ≤ %d µs: 240 ms or the server's hold (%v), + %v (a plain client saw this machine add up to %v)", q.name, q.v, hi, serverHeld, slack, envExcess))
		}
	}
	return over
}

// c17Hold is one request's stay in the server: read, then response
// written.
type c17Hold struct{ read, written time.Time }

// c17Probe sends one GET over a new TLS connection to srv with a plain Go
// client and returns the time from its write to the response's last byte.
func c17Probe(t *testing.T, srv *rawServer) time.Duration {
	t.Helper()
	c, err := tls.Dial("tcp", "127.0.0.1:"+srv.Port(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	t0 := time.Now()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		t.Fatalf("probe: write: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	if err != nil {
		t.Fatalf("probe: read: %v", err)
	}
	return time.Since(t0)
}

// c17Holds keeps how long the server really held its short responses
// (its timer's wait, which a busy or noisy host makes longer than asked).
type c17Holds struct {
	mu sync.Mutex
	d  []time.Duration
}

// quantile returns the q-quantile (0..1) of the holds kept, 0 if none.
func (h *c17Holds) quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.d) == 0 {
		return 0
	}
	s := slices.Clone(h.d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// c17Server answers request n (counted from 1 across connections, in the
// order received) after delay(n), and calls written(n) (if not nil) just
// before writing its response; it keeps the real length of each hold under a second in holds
// (if not nil).
func c17Server(t *testing.T, delay func(n int64) time.Duration, written func(n int64), holds *c17Holds) *rawServer {
	t.Helper()
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
	var seen atomic.Int64
	quit := make(chan struct{})
	srv := startRaw(t, &tls.Config{}, func(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
		for {
			if _, _, err := readRequest(br, st); err != nil {
				return
			}
			n := seen.Add(1)
			d := delay(n)
			t0 := time.Now()
			timer := time.NewTimer(d)
			select {
			case <-timer.C:
			case <-quit:
				timer.Stop()
				return
			}
			if holds != nil && d < time.Second {
				held := time.Since(t0)
				holds.mu.Lock()
				holds.d = append(holds.d, held)
				holds.mu.Unlock()
			}
			if written != nil {
				written(n)
			}
			if _, err := c.Write(resp); err != nil {
				return
			}
		}
	})
	t.Cleanup(func() { close(quit) })
	return srv
}

// c17Ordered checks min ≤ p50 ≤ p75 ≤ p90 ≤ p99 ≤ p99.9 ≤ p99.99 ≤ max
// and min ≤ mean ≤ max.
func c17Ordered(t *testing.T, l *hist.Summary) {
	t.Helper()
	seq := []struct {
		name string
		v    int64
	}{{"min", l.Min}, {"p50", l.P50}, {"p75", l.P75}, {"p90", l.P90}, {"p99", l.P99}, {"p99.9", l.P999}, {"p99.99", l.P9999}, {"max", l.Max}}
	for i := 1; i < len(seq); i++ {
		if seq[i].v < seq[i-1].v {
			t.Errorf("%s = %d µs < %s = %d µs: percentiles out of order", seq[i].name, seq[i].v, seq[i-1].name, seq[i-1].v)
		}
	}
	if l.Mean < float64(l.Min) || l.Mean > float64(l.Max) {
		t.Errorf("mean %.2f µs outside [min %d, max %d]", l.Mean, l.Min, l.Max)
	}
}
