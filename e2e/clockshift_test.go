package e2e

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/report"
)

// TestClockShiftDoesNotChangeResults: the same open-loop plan (2 agents,
// 400 requests/s in total, 4 s) runs twice, each time on a fresh cluster
// and a fresh counting target: once with every clock true, once with agent
// 2's wall clock 200 s ahead. Agents place the start instant and their
// intervals from the coordinator's instant translated into their own clock,
// and measure everything else on the monotonic clock, so the shift must
// change nothing but the offset the coordinator reports: merged rates equal
// within 1 %, timelines with the same points and per-point requests within
// 2 %, the target's count equal to requests + in flight both times, agent
// 2's reported offset 200 s ± 50 ms and the start skew under 5 ms. Rates
// and per-second counts get a margin for the stalls this process
// measurably suffered during the runs (c15StartProbe).
func TestClockShiftDoesNotChangeResults(t *testing.T) {
	const (
		rate   = 400
		window = 4 * time.Second
		shift  = 200 * time.Second
	)
	run := func(t *testing.T, shifts []time.Duration) (*report.Report, c15Noise) {
		t.Helper()
		srv := c15StartTarget(t, func(string, time.Time, time.Time) time.Duration { return time.Millisecond })
		p := plan.Plan{
			URL: srv.URL("/"), Load: plan.OpenLoop, Rate: rate, Connections: 10, Duration: window,
			TLS: c15TLS(),
		}
		probe := c15StartProbe(t, time.Millisecond)
		r, elapsed := c15RunOn(t, localcluster.Options{Agents: 2, CPUsPerAgent: 1, ClockShift: shifts, Logger: quietLogger()}, p)
		noise := probe.Stop()
		received := srv.Received()
		t.Logf("shifts %v: target received %d; issued %d, completed %d, in flight %d, errors %v, %.2f req/s, start skew %.0f us, elapsed %v; %v", shifts, received, r.Issued, r.Requests, r.InFlight, r.Errors, r.RPS, r.StartSkewUs, elapsed, noise)
		for _, a := range r.AgentRows {
			t.Logf("  agent %s: %d requests, clock offset %.0f us, RTT %.0f us, first send %+.0f us", a.Name, a.Requests, a.ClockOffsetUs, a.RTTUs, a.StartOffsetUs)
		}
		if got := r.Requests + r.InFlight; got != received {
			t.Errorf("shifts %v: target received %d, report completed %d + in flight %d = %d", shifts, received, r.Requests, r.InFlight, got)
		}
		if r.ErrorTotal() != 0 {
			t.Errorf("shifts %v: errors %v, want none", shifts, r.Errors)
		}
		// The first sends pass through a wake-up each: margin for the
		// scheduling delays measured during the run.
		// One stall of an agent's start wait moves its first send by up
		// to the longest wake-up delay measured during the run (with go
		// test's packages in parallel on 2 cores: 23-30 ms max against a
		// 1.2-1.9 ms p99, in both the shifted and the unshifted run).
		if allow := float64(noise.Max.Microseconds()); r.StartSkewUs >= 5_000+allow {
			t.Errorf("shifts %v: start skew %.0f us, want < 5 ms (+ %.0f us, the longest scheduling stall measured)", shifts, r.StartSkewUs, allow)
		}
		return r, noise
	}

	base, noiseBase := run(t, nil)
	shifted, noiseShifted := run(t, []time.Duration{0, shift})

	// A stall of either run's process moves about rate × its length of
	// requests across a second's boundary (c15StartProbe).
	stall := rate * (noiseBase.Max + noiseShifted.Max).Seconds()
	c15Near(t, "merged requests/s with agent 2 shifted (vs. without)", shifted.RPS, base.RPS, 0.01*base.RPS, stall/window.Seconds())
	if len(shifted.Timeline) != len(base.Timeline) {
		t.Fatalf("timeline: %d points with the shift, %d without", len(shifted.Timeline), len(base.Timeline))
	}
	for i := range base.Timeline {
		b, s := base.Timeline[i], shifted.Timeline[i]
		c15Near(t, fmt.Sprintf("timeline point %d requests with the shift (vs. without)", i), float64(s.Requests), float64(b.Requests), 0.02*float64(b.Requests), stall)
	}
	// localcluster names agent i "agent-(i+1)"; agent-2 is shifted.
	wantOffset := map[string]float64{"agent-1": 0, "agent-2": float64(shift / time.Microsecond)}
	if len(shifted.AgentRows) != len(wantOffset) {
		t.Fatalf("%d agent rows, want %d", len(shifted.AgentRows), len(wantOffset))
	}
	for _, a := range shifted.AgentRows {
		want, ok := wantOffset[a.Name]
		if !ok {
			t.Errorf("unexpected agent row %q", a.Name)
			continue
		}
		if math.Abs(a.ClockOffsetUs-want) > 50_000 {
			t.Errorf("agent %s: reported clock offset %.0f us, want %.0f us ± 50 ms", a.Name, a.ClockOffsetUs, want)
		}
	}
}
