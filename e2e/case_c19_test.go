package e2e

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/agent"
	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/localcluster"
	"github.com/phalanxload/phalanx/internal/plan"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestCaseC19ClockSkew: field case C19. A distributed tool's master
// trusted its workers' timestamps: over a day with drifting clocks its
// displayed rate fell from about 10k to about 6k req/s until the clocks
// were resynchronised, and containers a few minutes off made its rate
// chart fall far below the totals. Another tool printed negative totals
// and latencies (-1844 s), as after a wall-clock step during the run.
//
// (a) Two agents at 500 requests/s each (1000/s in total), agent 2's wall
// clock 200 s ahead of the coordinator's and agent 1's. What must hold: the
// merged rate is 1000/s ± 1 % and matches the target's count; the window is
// the plan's ± 0.5 s; every second of the timeline holds about 1000 (no
// 200 s hole or spike); the coordinator states the offset it measured
// (about 200 s for agent 2) and still starts both agents together. The case
// runs 30 s; this run lasts 8 s (scaled down to keep the suite short),
// which still gives seven whole seconds after the first. Under the race
// detector the agents send 200/s each (see the subtest). Per-second counts
// get a margin for the stalls this process measurably suffered during the
// run (c15StartProbe).
//
// (b) One agent whose wall clock steps back 30 minutes in the middle of
// the run must report no negative or absurd duration, the planned elapsed
// time, and its rate. The agent's wall clock is injected
// (agent.Config.Clock, through localcluster.Options.Agent) and steps once
// the window's first interval has been merged; the case's rate is scaled
// as in (a), and its window to 4 s.
func TestCaseC19ClockSkew(t *testing.T) {
	t.Run("a_agent_clock_200s_ahead", func(t *testing.T) {
		const (
			window = 8 * time.Second // the case's 30 s, scaled down
			shift  = 200 * time.Second
		)
		// 500/s per agent. Under the race detector the in-process cluster
		// and target spend about 0.6 ms of CPU per request, more than a
		// shared 2-core machine reliably gives this process at 1000/s;
		// there each agent sends 200/s. The clocks are what is under test.
		rate := 1000.0
		if c15RaceEnabled() {
			rate = 400
		}
		srv := c15StartTarget(t, func(string, time.Time, time.Time) time.Duration { return time.Millisecond })
		p := plan.Plan{
			URL: srv.URL("/"), Load: plan.OpenLoop, Rate: int64(rate), Connections: 20, Duration: window,
			TLS: c15TLS(),
		}
		probe := c15StartProbe(t, time.Millisecond)
		r, elapsed := c15RunOn(t, localcluster.Options{Agents: 2, CPUsPerAgent: 1, ClockShift: []time.Duration{0, shift}}, p)
		noise := probe.Stop()
		received := srv.Received()
		// A stall of the process moves about rate × its length of
		// requests across a second's boundary (c15StartProbe).
		stall := rate * noise.Max.Seconds()
		buckets := srv.Buckets(r.StartedAt, int(window/time.Second)+1)
		t.Logf("server received %d; per-second arrivals (coordinator's clock) %v; report: issued %d, completed %d, in flight %d, errors %v, window %.3f s, %.1f req/s, start skew %.0f us, elapsed %v; %v",
			received, buckets, r.Issued, r.Requests, r.InFlight, r.Errors, r.DurationS, r.RPS, r.StartSkewUs, elapsed, noise)
		for _, a := range r.AgentRows {
			t.Logf("agent %s: %d requests, %.1f req/s, clock offset %.0f us, RTT %.0f us, first send %+.0f us, error %q", a.Name, a.Requests, a.RPS, a.ClockOffsetUs, a.RTTUs, a.StartOffsetUs, a.Error)
		}
		var points []string
		for _, pt := range r.Timeline {
			points = append(points, fmt.Sprintf("%d@%.3fs+%.3fs", pt.Requests, pt.StartS, pt.DurationS))
		}
		t.Logf("timeline: %v", points)

		c15Near(t, "merged requests/s", r.RPS, rate, 0.01*rate, stall/window.Seconds())
		if got := r.Requests + r.InFlight; got != received || r.Issued != received {
			t.Errorf("target received %d; report completed %d + in flight %d = %d, issued %d: want all equal", received, r.Requests, r.InFlight, got, r.Issued)
		}
		if r.ErrorTotal() != 0 {
			t.Errorf("errors %v, want none", r.Errors)
		}
		if math.Abs(r.DurationS-window.Seconds()) > 0.5 {
			t.Errorf("window = %.3f s, want %v ± 0.5 s", r.DurationS, window)
		}
		// The run must not wait for (or skip) 200 s of agent 2's clock.
		if elapsed > window+5*time.Second {
			t.Errorf("run took %v, want about %v", elapsed, window)
		}
		if len(r.Timeline) != int(window/time.Second) {
			t.Errorf("timeline has %d points, want %d", len(r.Timeline), int(window/time.Second))
		}
		for i, pt := range r.Timeline {
			if int(pt.Index) != i || math.Abs(pt.StartS-float64(i)) > 1e-3 || math.Abs(pt.DurationS-1) > 1e-3 {
				t.Errorf("timeline point %d: index %d, start %.3f s, length %.3f s: want %d, %d s, 1 s", i, pt.Index, pt.StartS, pt.DurationS, i, i)
			}
			c15Near(t, fmt.Sprintf("timeline second %d requests", i), float64(pt.Requests), rate, 0.05*rate, stall)
		}
		// The target's own clock agrees: agent 2's requests arrive in the
		// coordinator's seconds, not 200 s away.
		for k := 1; k < int(window/time.Second); k++ {
			c15Near(t, fmt.Sprintf("target arrivals in second %d", k), float64(buckets[k]), rate, 0.05*rate, stall)
		}
		if len(r.AgentRows) != 2 {
			t.Fatalf("%d agent rows, want 2", len(r.AgentRows))
		}
		// localcluster names agent i "agent-(i+1)"; agent-2 is shifted.
		// The first sends pass through a wake-up each (margin: wake).
		wake := float64(noise.P99.Microseconds())
		wantOffset := map[string]float64{"agent-1": 0, "agent-2": float64(shift / time.Microsecond)}
		for _, a := range r.AgentRows {
			c15Near(t, "agent "+a.Name+" requests/s", a.RPS, rate/2, 0.02*rate/2, stall/2/window.Seconds())
			want, ok := wantOffset[a.Name]
			if !ok {
				t.Errorf("unexpected agent row %q", a.Name)
			}
			if math.Abs(a.ClockOffsetUs-want) > 50_000 {
				t.Errorf("agent %s: clock offset %.0f us, want %.0f us ± 50 ms (the coordinator states each agent's offset)", a.Name, a.ClockOffsetUs, want)
			}
			// In the coordinator's clock each agent's first send is at the
			// start instant (plus its first tick, 1-2.5 ms), not 200 s off.
			if math.Abs(a.StartOffsetUs) > 50_000+wake {
				t.Errorf("agent %s: first send %+.0f us from the start instant, want within 50 ms (+ %.0f us for measured scheduling noise)", a.Name, a.StartOffsetUs, wake)
			}
		}
		if r.StartSkewUs >= 5_000+wake {
			t.Errorf("start skew %.0f us, want < 5 ms (+ %.0f us for measured scheduling noise)", r.StartSkewUs, wake)
		}
	})

	t.Run("b_wall_clock_step_mid_run", func(t *testing.T) {
		const (
			window = 4 * time.Second
			step   = -30 * time.Minute
		)
		rate := 500.0
		if c15RaceEnabled() {
			rate = 200
		}
		// The agent's wall clock (agent.Config.Clock, what it answers the
		// coordinator's clock samples with and waits for the start on)
		// steps back 30 minutes when the first interval of the window has
		// been merged: mid-run, after the start.
		clk := &steppingClock{}
		srv := c15StartTarget(t, func(string, time.Time, time.Time) time.Duration { return time.Millisecond })
		p := plan.Plan{URL: srv.URL("/"), Load: plan.OpenLoop, Rate: int64(rate), Connections: 10, Duration: window, TLS: c15TLS()}
		p.TLS.CAPEM = testCA(t).CAPEM
		c, err := localcluster.StartWith(context.Background(), localcluster.Options{Agents: 1, CPUsPerAgent: 1, Logger: quietLogger(),
			Agent: func(_ int, cfg *agent.Config) { cfg.Clock = clk.Now }})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		probe := c15StartProbe(t, time.Millisecond)
		began := time.Now()
		res, err := c.Coordinator.RunPlanWith(context.Background(), p, coordinator.RunHooks{
			Progress: func(*pb.Progress) { clk.step(step) },
		})
		elapsed := time.Since(began)
		noise := probe.Stop()
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		r, err := wire.ReportFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		stall := rate * noise.Max.Seconds()
		t.Logf("clock stepped %v after %v; report: window %.3f s, %.1f req/s, issued %d, completed %d, in flight %d, errors %v, elapsed %v; %v",
			step, clk.steppedAfter(began), r.DurationS, r.RPS, r.Issued, r.Requests, r.InFlight, r.Errors, elapsed, noise)
		if !clk.stepped() {
			t.Fatal("the clock never stepped: no interval was merged")
		}
		if math.Abs(r.DurationS-window.Seconds()) > 0.5 {
			t.Errorf("window = %.3f s, want %v ± 0.5 s (the planned one, not 30 min off)", r.DurationS, window)
		}
		if elapsed > window+10*time.Second {
			t.Errorf("run took %v, want about %v", elapsed, window)
		}
		if received := srv.Received(); r.Issued != received || r.ErrorTotal() != 0 {
			t.Errorf("target received %d, report issued %d, errors %v: want equal and none", received, r.Issued, r.Errors)
		}
		c15Near(t, "requests/s", r.RPS, rate, 0.02*rate, stall/window.Seconds())
		if r.Latency == nil || r.Latency.Min < 0 || r.Latency.Max > int64(5*time.Second/time.Microsecond) {
			t.Errorf("latency %+v: want samples between 0 and 5 s (no negative or absurd duration)", r.Latency)
		}
		if len(r.Timeline) != int(window/time.Second) {
			t.Errorf("timeline has %d points, want %d", len(r.Timeline), int(window/time.Second))
		}
		for i, pt := range r.Timeline {
			if int(pt.Index) != i || math.Abs(pt.StartS-float64(i)) > 1e-3 || math.Abs(pt.DurationS-1) > 1e-3 || pt.Requests <= 0 {
				t.Errorf("timeline point %d: index %d, start %.3f s, length %.3f s, %d requests: want %d, %d s, 1 s, some", i, pt.Index, pt.StartS, pt.DurationS, pt.Requests, i, i)
			}
		}
		if len(r.AgentRows) != 1 || math.Abs(r.AgentRows[0].RPS-rate) > 0.02*rate+stall/window.Seconds() {
			t.Errorf("agent rows %+v: want one at about %.0f req/s", r.AgentRows, rate)
		}
	})
}

// steppingClock is a wall clock that steps by a fixed amount once, as an
// NTP step or an operator's date(1) does, for an agent's Config.Clock.
type steppingClock struct {
	shift atomic.Int64 // nanoseconds added to time.Now, 0 before the step
	at    atomic.Int64 // when it stepped, Unix nanoseconds (monotonic-free), 0 before
}

func (c *steppingClock) Now() time.Time { return time.Now().Add(time.Duration(c.shift.Load())) }

// step shifts the clock by d the first time it is called.
func (c *steppingClock) step(d time.Duration) {
	if c.at.CompareAndSwap(0, time.Now().UnixNano()) {
		c.shift.Store(int64(d))
	}
}

func (c *steppingClock) stepped() bool { return c.at.Load() != 0 }

func (c *steppingClock) steppedAfter(t time.Time) time.Duration {
	return time.Unix(0, c.at.Load()).Sub(t).Round(time.Millisecond)
}
