package e2e

import (
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
)

// TestCaseC20MergedPercentiles: field case C20. Tools combined per-runner
// or per-window percentiles instead of merging histograms: one showed the
// maximum of 10-second p95s as the test's p95, so one spike set the
// result; another folded sub-series percentiles with max, so 1000 requests
// of 10 ms plus 10 of 2000 ms gave p95 = 2000 ms instead of about 10 ms;
// wrk merged sampled per-thread data and showed p99 = 190 ms where ab saw
// sub-millisecond latencies. What must hold: the coordinator's merge of the
// agents' (and workers') histograms is the histogram of all samples. With
// 1000 samples of 10 ms and 10 of 2000 ms: count 1010,
// p50 = p90 = p95 = p99 = 10 ms ± 1 ms, p99.9 = max = 2000 ms ± 20 ms (rank
// 1009 of 1010). A p95 near 2000 ms (max of the parts) or near 1005 ms
// (their mean) is a failure. Single-agent and multi-agent runs agree.
//
// The case has agent A send only /fast and agent B only /slow; Phalanx
// gives every agent the same plan, so the test sends both from one plan: a
// request mix /fast:/slow = 100:1. Every connection walks the mix from its
// own starting point (connection i from entry i mod 101), so a connection
// sends exactly one /slow per 101 requests only if it sends whole cycles of
// the mix. In count mode with one connection per worker, each connection's
// request count is its worker's exact share, so the sample set is exact:
// two agents of five workers, 1010 requests, 101 per connection: 1000 fast
// and 10 slow. The runs are closed loop: an open-loop connection whose
// request is held 2 s would make the fast requests scheduled behind it
// wait, and latency from the intended send would rightly charge them that
// wait; that is C08's subject, not this one's. (Open loop with enough
// connections would avoid the queueing, but then which connection sends
// which entry depends on timing and the number of slow samples is not
// fixed.)
//
// Variant: one agent with four workers. 1010 does not split into whole
// mix cycles over four workers (it would give 12 slow samples), so that
// run sends 404 requests, one cycle per worker: 400 fast and 4 slow, whose
// p50..p99 are fast (rank 400 of 404) and p99.9 and max slow, as in the
// main run. Summaries report p90 and p99, not p95; p95 lies between them.
func TestCaseC20MergedPercentiles(t *testing.T) {
	const (
		fast    = 10 * time.Millisecond
		slow    = 2000 * time.Millisecond
		fastTol = time.Millisecond
		slowTol = 20 * time.Millisecond
	)
	type result struct {
		l     *hist.Summary
		noise c15Noise
	}
	run := func(t *testing.T, agents, workers int, nFastWant, nSlowWant int64) result {
		t.Helper()
		n := nFastWant + nSlowWant
		srv := c15StartTarget(t, func(path string, _, _ time.Time) time.Duration {
			if path == "/slow" {
				return slow
			}
			return fast
		})
		p := plan.Plan{
			URL: srv.URL("/fast"),
			Mix: []plan.Request{
				{URL: srv.URL("/fast"), Weight: 100},
				{URL: srv.URL("/slow"), Weight: 1},
			},
			Requests: n, Connections: agents * workers,
			Timeout: 5 * time.Second, // above the slow response's 2 s
			TLS:     c15TLS(),
		}
		probe := c15StartProbe(t, fast)
		res := runCase(t, p, agents, workers)
		noise := probe.Stop()
		r := res.Report
		nFast, nSlow := srv.Path("/fast"), srv.Path("/slow")
		t.Logf("%d agent(s) × %d worker(s): target served /fast %d, /slow %d; report: issued %d, completed %d, errors %v, in flight %d, window %.2f s, elapsed %v",
			agents, workers, nFast, nSlow, r.Issued, r.Requests, r.Errors, r.InFlight, r.DurationS, res.Elapsed)
		for _, a := range r.AgentRows {
			t.Logf("  agent %s: %d requests, error %q", a.Name, a.Requests, a.Error)
		}
		l := r.Latency
		if l == nil {
			t.Fatal("no latency samples")
		}
		t.Logf("merged latency: n=%d min %d p50 %d p75 %d p90 %d p99 %d p99.9 %d max %d us, mean %.0f us; %v", l.Count, l.Min, l.P50, l.P75, l.P90, l.P99, l.P999, l.Max, l.Mean, noise)

		if nFast != nFastWant || nSlow != nSlowWant {
			t.Errorf("target served /fast %d, /slow %d: want %d and %d (fixture)", nFast, nSlow, nFastWant, nSlowWant)
		}
		if r.Requests != n || r.Issued != n || r.InFlight != 0 || r.ErrorTotal() != 0 {
			t.Errorf("completed %d, issued %d, in flight %d, errors %v: want %d completed, nothing else", r.Requests, r.Issued, r.InFlight, r.Errors, n)
		}
		if l.Count != r.Requests {
			t.Errorf("merged histogram holds %d samples, %d requests completed", l.Count, r.Requests)
		}
		var perAgent int64
		for _, a := range r.AgentRows {
			perAgent += a.Requests
		}
		if perAgent != r.Requests {
			t.Errorf("agents' requests add up to %d, merged %d", perAgent, r.Requests)
		}
		// A sample passes through about three wake-ups (the target's read
		// and hold timer, the response read): margins for the scheduling
		// delays measured during the run (c15StartProbe): the median delay
		// for p50, the 99th percentile for p75 and p90. p99 is rank 1000
		// of 1010 (400 of 404), the slowest fast sample: its margin is
		// the longest delay measured, as for the slow samples.
		allow50, allow, allowMax := 3*noise.P50, 3*noise.P99, 3*noise.Max
		for _, q := range []struct {
			name      string
			got       int64
			want, tol time.Duration
			allow     time.Duration
		}{
			{"p50", l.P50, fast, fastTol, allow50},
			{"p75", l.P75, fast, fastTol, allow},
			{"p90", l.P90, fast, fastTol, allow},
			{"p99", l.P99, fast, fastTol, allowMax},
			{"p99.9", l.P999, slow, slowTol, allowMax},
			{"max", l.Max, slow, slowTol, allowMax},
		} {
			if q.name == "p99" && c15RaceEnabled() {
				// The slowest fast sample is one request: under the race
				// detector a single stall the probe did not sample moves
				// it (a CI dry run: 77 ms against a 72 ms margin). Judged
				// without the detector (make test-cases, in CI).
				t.Logf("merged p99 %d us not judged under the race detector (want %v ± %v)", q.got, q.want, q.tol)
				continue
			}
			c15Near(t, "merged "+q.name+" (us)", float64(q.got), float64(q.want.Microseconds()), float64(q.tol.Microseconds()), float64(q.allow.Microseconds()))
		}
		// Each request of the mix apart, merged exactly across agents and
		// workers: the target's counts per path, their latencies apart
		// (every /slow sample at 2 s, the /fast ones far below).
		if len(r.Mix) != 2 || r.MixAgents != agents {
			t.Fatalf("mix: %d entries over %d agents, want 2 over %d", len(r.Mix), r.MixAgents, agents)
		}
		for i, want := range []struct {
			path string
			n    int64
		}{{"/fast", nFast}, {"/slow", nSlow}} {
			m := r.Mix[i]
			if m.URL != srv.URL(want.path) || m.Requests != want.n || m.Status["200"] != want.n || len(m.Errors) != 0 || m.Latency == nil || m.Latency.Count != want.n {
				t.Errorf("mix request %d: %+v; want %s with %d × 200 (the target's count)", i, m, want.path, want.n)
			}
		}
		if f, s := r.Mix[0].Latency, r.Mix[1].Latency; f != nil && s != nil && (s.Min < (slow-slowTol).Microseconds() || f.P50 >= slow.Microseconds()/2) {
			t.Errorf("mix latencies: /fast p50 %d us, /slow min %d us; want /slow all at %v (less the histogram's %v) or above and /fast far below", f.P50, s.Min, slow, slowTol)
		}
		// The mean of all samples: (1000 × 10 ms + 10 × 2000 ms) / 1010.
		wantMean := float64(nFastWant*fast.Microseconds()+nSlowWant*slow.Microseconds()) / float64(n)
		c15Near(t, "merged mean (us)", l.Mean, wantMean, 1200, float64(allow.Microseconds()))
		return result{l, noise}
	}

	var twoAgents, fourWorkers result
	t.Run("two_agents", func(t *testing.T) { twoAgents = run(t, 2, 5, 1000, 10) })
	t.Run("one_agent_four_workers", func(t *testing.T) { fourWorkers = run(t, 1, 4, 400, 4) })
	if twoAgents.l == nil || fourWorkers.l == nil {
		return
	}
	// The same distribution, the same merged percentiles (within the
	// case's tolerances: the runs time real responses, which differ a
	// little).
	allow := 3 * (twoAgents.noise.P99 + fourWorkers.noise.P99)
	allowMax := 3 * (twoAgents.noise.Max + fourWorkers.noise.Max)
	a, b := twoAgents.l, fourWorkers.l
	for _, q := range []struct {
		name       string
		a, b       int64
		tol, allow time.Duration
	}{
		{"p50", a.P50, b.P50, fastTol, allow},
		{"p99", a.P99, b.P99, fastTol, allowMax},
		{"p99.9", a.P999, b.P999, slowTol, allowMax},
		{"max", a.Max, b.Max, slowTol, allowMax},
	} {
		if q.name == "p99" && c15RaceEnabled() {
			continue // as above: one request's stall, judged without the detector
		}
		c15Near(t, "merged "+q.name+" over two agents vs. four workers (us)", float64(q.a), float64(q.b), float64(q.tol.Microseconds()), float64(q.allow.Microseconds()))
	}
}
