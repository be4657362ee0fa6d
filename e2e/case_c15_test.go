package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
	"github.com/phalanxload/phalanx/internal/wire"
)

// TestCaseC15GlobalRate: field case C15. Tools applied a "rate" limit per
// worker or per connection: hey's -q 10 with its 50 default workers sent
// about 500 req/s, and each worker fell short of its share whenever one
// response took longer than its pacing gap; h2load's per-client --rps went
// from right (3497 req/s at 70 × 50 clients) to more than three times the
// target (11,506 req/s at 78). What must hold: the open-loop rate is the
// total across the cluster, whatever the number of connections or agents.
//
// Against a 1 ms keep-alive TLS target that timestamps every arrival:
//
//	(a) rate 500/s with c=50, c=5 and c=1: the server receives
//	    duration × 500 ± 1 % in each run, and every whole second after the
//	    first holds 500 ± 5 % arrivals;
//	(b) rate 3900/s with c=50: duration × 3900 ± 1.5 %;
//	(c) 2 agents, rate 1000/s in total: 1000/s ± 2 % at the server (each
//	    agent about 500/s), not 2000/s.
//
// The case runs 20 s; these runs last 6 s (scaled down to keep the suite
// short). The per-second criterion still covers five whole seconds after
// the first. Seconds are counted at the server from the run's start instant
// (report.StartedAt, the coordinator's clock, which is this process's).
// Under the race detector, (b) keeps h2load's per-connection rate on fewer
// connections and (c) runs at 400/s (see the subtests). Counts get a
// margin for the stalls this process measurably suffered during the run
// (c15StartProbe).
func TestCaseC15GlobalRate(t *testing.T) {
	const window = 6 * time.Second // the case's 20 s, scaled down

	run := func(t *testing.T, rate int64, conns, agents, workers int, tolTotal float64) (*report.Report, c15Noise) {
		t.Helper()
		srv := c15StartTarget(t, func(string, time.Time, time.Time) time.Duration { return time.Millisecond })
		p := plan.Plan{
			URL: srv.URL("/"), Load: plan.OpenLoop, Rate: rate, Connections: conns, Duration: window,
			// c is the connections opened before the start. The run may
			// add a few when every connection is busy: on a loaded machine
			// one connection cannot always turn a 1 ms response around
			// within 1/rate, and the case is about the rate being global,
			// not about connection reuse.
			MaxConnections: max(conns, 10),
			TLS:            c15TLS(),
		}
		probe := c15StartProbe(t, time.Millisecond)
		res := runCase(t, p, agents, workers)
		noise := probe.Stop()
		r := res.Report
		received := srv.Received()
		want := float64(rate) * window.Seconds()
		buckets := srv.Buckets(r.StartedAt, int(window/time.Second)+1)
		t.Logf("rate %d, c=%d, %d agent(s) × %d worker(s): server received %d (want %.0f); per-second arrivals %v; report: issued %d, completed %d, in flight %d, errors %v, %.1f req/s, missed %d, connections opened %d, elapsed %v; %v",
			rate, conns, agents, workers, received, want, buckets, r.Issued, r.Requests, r.InFlight, r.Errors, r.RPS, r.Missed, r.ConnectionsOpened, res.Elapsed, noise)
		if r.Latency != nil && r.ServiceTimeUs != nil {
			t.Logf("latency p50 %d p99 %d max %d us; service time p50 %d p99 %d max %d us", r.Latency.P50, r.Latency.P99, r.Latency.Max, r.ServiceTimeUs.P50, r.ServiceTimeUs.P99, r.ServiceTimeUs.Max)
		}

		// A stall of the process moves about rate × its length of sends
		// (across a second's boundary, or past the window's end).
		stall := float64(rate) * noise.Max.Seconds()
		c15Near(t, "server arrivals", float64(received), want, tolTotal*want, stall)
		// The last bucket holds arrivals after the window (a straggler or
		// none); every whole second after the first must hold rate ± 5 %.
		for k := 1; k < int(window/time.Second); k++ {
			c15Near(t, fmt.Sprintf("server arrivals in second %d", k), float64(buckets[k]), float64(rate), 0.05*float64(rate), stall)
		}
		if r.Issued != received {
			t.Errorf("report issued %d, server received %d: want equal", r.Issued, received)
		}
		if r.Mode != "open" || r.LatencyBasis != "intended send" {
			t.Errorf("mode %q, latency basis %q: want open, intended send", r.Mode, r.LatencyBasis)
		}
		if math.Abs(r.TargetRPS-float64(rate)) > 1e-6 {
			t.Errorf("report target rate = %.2f, want %d", r.TargetRPS, rate)
		}
		c15Near(t, "report requests/s", r.RPS, float64(rate), tolTotal*float64(rate), stall/window.Seconds())
		if r.ErrorTotal() != 0 {
			t.Errorf("errors %v, want none", r.Errors)
		}
		return r, noise
	}

	t.Run("a_rate500_c50", func(t *testing.T) { run(t, 500, 50, 1, 2, 0.01) })
	t.Run("a_rate500_c5", func(t *testing.T) { run(t, 500, 5, 1, 2, 0.01) })
	t.Run("a_rate500_c1", func(t *testing.T) { run(t, 500, 1, 1, 1, 0.01) })
	t.Run("b_rate78_per_connection", func(t *testing.T) {
		// h2load broke at 78 req/s per client: 3900/s over 50 connections.
		// Under the race detector, the in-process target, coordinator and
		// agent need about two CPUs for 3900 TLS requests/s, more than a
		// shared 2-core machine gives; there the run keeps the per-
		// connection rate that broke h2load (78/s) on 10 connections:
		// 780/s in total.
		rate, conns := int64(3900), 50
		if c15RaceEnabled() {
			rate, conns = 780, 10
		}
		run(t, rate, conns, 1, 2, 0.015)
	})
	t.Run("c_two_agents", func(t *testing.T) {
		// 1000/s in total over two agents. Under the race detector the
		// in-process cluster and target spend about 0.6 ms of CPU per
		// request, more than a shared 2-core machine reliably gives this
		// process at 1000/s; there the total is 400/s. Either way the
		// target must see the total, not twice it.
		rate := int64(1000)
		if c15RaceEnabled() {
			rate = 400
		}
		r, noise := run(t, rate, 10, 2, 1, 0.02)
		if len(r.AgentRows) != 2 {
			t.Fatalf("%d agent rows, want 2", len(r.AgentRows))
		}
		half := float64(rate) / 2
		for _, a := range r.AgentRows {
			c15Near(t, "agent "+a.Name+" requests/s", a.RPS, half, 0.02*half, half*noise.Max.Seconds()/window.Seconds())
		}
	})
}

// c15Near fails t unless got is within tol + allow of want. allow is the
// part of the bound that comes from measured scheduling noise (see
// c15StartProbe); the message shows both.
func c15Near(t *testing.T, what string, got, want, tol, allow float64) {
	t.Helper()
	if math.Abs(got-want) > tol+allow {
		t.Errorf("%s = %.2f, want %.2f ± %.2f (+ %.2f for measured scheduling noise)", what, got, want, tol, allow)
	}
}

// c15RaceEnabled reports whether the test binary was built with -race.
func c15RaceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// c15Target is the keep-alive HTTP/1.1 TLS target of the open-loop cases
// (C08, C15, C19, C20 and the clock-shift test). It answers each request
// with a small 200 after a delay chosen per request, and records each
// arrival's time and path.
type c15Target struct {
	*rawServer
	delay func(path string, arrival, first time.Time) time.Duration
	stop  chan struct{}
	// written, if not nil, is called after each response is written.
	written func(path string, arrival, at time.Time)

	mu       sync.Mutex
	arrivals []time.Time
	paths    map[string]int64

	responses atomic.Int64
}

// c15OK is the target's response.
var c15OK = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")

// c15StartTarget starts a target whose response to a request for path,
// arriving at arrival (first: the first arrival of the server's life), is
// written delay(path, arrival, first) after the arrival.
func c15StartTarget(t *testing.T, delay func(path string, arrival, first time.Time) time.Duration) *c15Target {
	t.Helper()
	return c15StartTargetNotify(t, delay, nil)
}

// c15StartTargetNotify is c15StartTarget, and calls written (if not nil)
// after each response is written.
func c15StartTargetNotify(t *testing.T, delay func(path string, arrival, first time.Time) time.Duration, written func(path string, arrival, at time.Time)) *c15Target {
	t.Helper()
	s := &c15Target{delay: delay, written: written, stop: make(chan struct{}), paths: map[string]int64{}}
	s.rawServer = startRaw(t, &tls.Config{MinVersion: tls.VersionTLS12}, s.serve)
	// Registered after startRaw's Close, so it runs first: held responses
	// are abandoned and their handlers return.
	t.Cleanup(func() { close(s.stop) })
	return s
}

func (s *c15Target) serve(c net.Conn, br *bufio.Reader, _ int64, st *rawStats) {
	for {
		line, _, err := readRequest(br, st)
		if err != nil {
			return
		}
		now := time.Now()
		path := line
		if f := strings.Fields(line); len(f) >= 2 {
			path = f[1]
		}
		s.mu.Lock()
		s.arrivals = append(s.arrivals, now)
		s.paths[path]++
		first := s.arrivals[0]
		s.mu.Unlock()
		if d := time.Until(now.Add(s.delay(path, now, first))); d > 0 {
			timer := time.NewTimer(d)
			select {
			case <-timer.C:
			case <-s.stop:
				timer.Stop()
				return
			}
		}
		if _, err := c.Write(c15OK); err != nil {
			return
		}
		s.responses.Add(1)
		if s.written != nil {
			s.written(path, now, time.Now())
		}
	}
}

// Received returns the number of requests received.
func (s *c15Target) Received() int64 { return s.Stats.Requests.Load() }

// Path returns the number of requests received for path.
func (s *c15Target) Path(path string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paths[path]
}

// First returns the first arrival (zero time if none).
func (s *c15Target) First() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.arrivals) == 0 {
		return time.Time{}
	}
	return s.arrivals[0]
}

// Buckets counts arrivals per whole second from origin: n buckets, the
// last one holding everything from second n-1 on. Arrivals before origin
// are left out.
func (s *c15Target) Buckets(origin time.Time, n int) []int64 {
	out := make([]int64, n)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.arrivals {
		d := a.Sub(origin)
		if d < 0 {
			continue
		}
		out[min(int(d/time.Second), n-1)]++
	}
	return out
}

// Between counts arrivals in [from, to).
func (s *c15Target) Between(from, to time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, a := range s.arrivals {
		if !a.Before(from) && a.Before(to) {
			n++
		}
	}
	return n
}

// c15RunOn runs p on a fresh cluster started with o (see
// localcluster.StartWith), as runCase does, and returns the report and the
// wall time of RunPlan. p's TLS CA defaults to the package CA.
func c15RunOn(t *testing.T, o localcluster.Options, p plan.Plan) (*report.Report, time.Duration) {
	t.Helper()
	if len(p.TLS.CAPEM) == 0 && !p.TLS.Insecure {
		p.TLS.CAPEM = testCA(t).CAPEM
	}
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	c, err := localcluster.StartWith(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	res, err := c.Coordinator.RunPlan(context.Background(), p, nil)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("run %s: %v", p.URL, err)
	}
	r, err := wire.ReportFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Requests + r.ErrorTotal() + r.InFlight; got != r.Issued {
		t.Errorf("accounting: completed %d + errors %d + in flight %d = %d, issued %d", r.Requests, r.ErrorTotal(), r.InFlight, got, r.Issued)
	}
	return r, elapsed
}

// c15Noise is how late this process's goroutines woke from timers while a
// run went on (see c15StartProbe).
type c15Noise struct {
	P50, P99, Max time.Duration
	N             int
}

func (n c15Noise) String() string {
	return fmt.Sprintf("timer wake-up delay p50 %v p99 %v max %v (n=%d)", n.P50, n.P99, n.Max, n.N)
}

// c15Probe measures scheduling noise during a run.
type c15Probe struct {
	stop chan struct{}
	done chan struct{}
	late []time.Duration
}

// c15StartProbe starts measuring how late a goroutine of this process
// wakes from a timer of the given period (the length of the operations
// whose timing is checked: a longer wait is more likely to overlap a stall
// of the process). Every latency the tests check passes through a few such
// waits (the target's hold timer, the reads on both ends), and every
// per-second count shifts by about rate × the longest stall. On an
// idle machine the delays are tens of microseconds and the cases'
// tolerances apply as written; on a loaded shared machine (other test
// runs, the race detector) they can reach tens of milliseconds, and the
// tests widen their tolerances by what this probe measured during the run,
// never by a fixed amount. The wrong results the cases describe are orders
// of magnitude beyond such noise.
func c15StartProbe(t *testing.T, period time.Duration) *c15Probe {
	p := &c15Probe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		timer := time.NewTimer(period)
		defer timer.Stop()
		for {
			t0 := time.Now()
			timer.Reset(period)
			select {
			case <-p.stop:
				return
			case <-timer.C:
			}
			p.late = append(p.late, max(time.Since(t0)-period, 0))
		}
	}()
	t.Cleanup(func() { p.Stop() })
	return p
}

// Stop ends the probe (once) and returns what it measured.
func (p *c15Probe) Stop() c15Noise {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	late := slices.Clone(p.late)
	slices.Sort(late)
	n := c15Noise{N: len(late)}
	if len(late) > 0 {
		n.P50 = late[len(late)/2]
		n.P99 = late[len(late)*99/100]
		n.Max = late[len(late)-1]
	}
	return n
}

// c15TLS is the client TLS of the open-loop cases: the package CA (filled
// in by runCase and c15RunOn) and P-256 key exchange only. The group is
// not under test; P-256 has an assembly implementation, which the race
// detector does not instrument, so a handshake costs about a third of an
// X25519 one (pure Go) and a quarter or less of the default hybrid ML-KEM
// one. Tests that open many connections stay light on a shared machine.
func c15TLS() plan.TLS { return plan.TLS{Curves: []string{"P-256"}} }
