package search

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/phalanxload/phalanx/internal/report"
)

// modelled is a Runner over a server of capacity k requests/s: p99 1 ms
// below it, growing 50 ms per capacity's worth above it, with a wobble
// per repeat so that the repeats differ.
func modelled(k float64, calls *int) Runner {
	return func(_ context.Context, x float64, repeat int) (Outcome, error) {
		*calls++
		p99 := 1000 * (1 + 0.1*float64(repeat%3-1)*0.5)
		if x > k {
			p99 += 50000 * (x - k) / k
		}
		achieved := math.Min(x, k)
		return Outcome{RunID: "r", AchievedRPS: achieved, P99Us: int64(p99), SLOValues: []float64{p99}, SLOPass: []bool{p99 < 3000},
			ServerBound: x > k, ServerBoundReasons: []string{"every connection busy"}}, nil
	}
}

var p99Under3ms = []SLO{{Text: "p99<3ms", Limit: 3000, Below: true}}

// TestFindsKnee: over a server of capacity 4,000/s with the range
// 1000..200000 (above it, short of the target and server-bound: a
// failure), the search grows 1000, 2000, 4000, 8000, bisects to 2 %,
// repeats the bracket 3 times and reports a knee within 5 % of 4,000
// whose interval holds it.
func TestFindsKnee(t *testing.T) {
	calls := 0
	r, err := Run(context.Background(), Config{SLOs: p99Under3ms}, modelled(4000, &calls))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != "found" {
		t.Fatalf("outcome %q: %s", r.Outcome, r.Message)
	}
	if r.Knee < 0.95*4000 || r.Knee > 1.05*4000 || r.KneeLo > 4000 || r.KneeHi < 4000 {
		t.Errorf("knee %v (%v..%v), want within 5 %% of 4000 with 4000 inside", r.Knee, r.KneeLo, r.KneeHi)
	}
	if (r.Failing-r.Passing)/r.Passing > DefaultPrecision {
		t.Errorf("bracket %v..%v wider than 2 %%", r.Passing, r.Failing)
	}
	reps := 0
	for _, st := range r.Steps {
		if st.Repeat > 0 {
			reps++
		}
	}
	if reps != 2*(DefaultRepeats-1) || calls != len(r.Steps) {
		t.Errorf("%d repeats of %d steps (%d calls), want %d", reps, len(r.Steps), calls, 2*(DefaultRepeats-1))
	}
	if r.Steps[0].Target != 1000 || r.Steps[1].Target != 2000 || r.Steps[3].Target != 8000 {
		t.Errorf("growth %v, %v, %v: want doubling from 1000", r.Steps[0].Target, r.Steps[1].Target, r.Steps[3].Target)
	}
	for i := 1; i < len(r.Curve); i++ {
		if r.Curve[i].Target < r.Curve[i-1].Target {
			t.Fatalf("curve not sorted by target: %+v", r.Curve)
		}
	}
	var b strings.Builder
	if err := writeText(&b, r); err != nil || !strings.Contains(b.String(), "Knee: ") {
		t.Errorf("text (%v):\n%s", err, b.String())
	}
}

// TestKneeCountsRepeats: when the repeats at the bracket's failing step
// pass (a noisy boundary), the search says how many of its runs broke
// there, not that every one did.
func TestKneeCountsRepeats(t *testing.T) {
	calls := 0
	base := modelled(4000, &calls)
	r, err := Run(context.Background(), Config{SLOs: p99Under3ms}, func(ctx context.Context, x float64, repeat int) (Outcome, error) {
		if repeat > 0 && x > 4000 { // this repeat held, at its target
			o, err := base(ctx, 4000, repeat)
			o.AchievedRPS = x
			return o, err
		}
		return base(ctx, x, repeat)
	})
	if err != nil || r.Outcome != "found" {
		t.Fatalf("outcome %q (%v): %s", r.Outcome, err, r.Message)
	}
	if r.PassingHeld != DefaultRepeats || r.FailingBroke != 1 {
		t.Errorf("held %d at %v, broke %d at %v: want %d and 1", r.PassingHeld, r.Passing, r.FailingBroke, r.Failing, DefaultRepeats)
	}
	var b strings.Builder
	if err := writeText(&b, r); err != nil || !strings.Contains(b.String(), "in 3 of 3 runs and broke at "+fmtLoad(r.Failing)+" in 1 of 3\n") {
		t.Errorf("text (%v):\n%s", err, b.String())
	}
}

// TestClientBoundInconclusive: a client-bound step ends the search as
// inconclusive, never a pass, naming the saturated agent and asking for
// more agents; a step 5 % short of its target is inconclusive too.
func TestClientBoundInconclusive(t *testing.T) {
	run := func(_ context.Context, x float64, _ int) (Outcome, error) {
		o := Outcome{AchievedRPS: x, SLOValues: []float64{1000}, SLOPass: []bool{true}, AgentDemand: map[string]float64{"a1": 0.4, "a2": 0.97}}
		if x >= 4000 {
			o.ClientBound, o.ClientBoundReasons = true, []string{"agent a2's CPUs were 97 % busy"}
		}
		return o, nil
	}
	r, err := Run(context.Background(), Config{SLOs: p99Under3ms, Agents: 2}, run)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != "inconclusive" || len(r.SaturatedAgents) != 1 || r.SaturatedAgents[0] != "a2" || r.MoreAgents != 1 {
		t.Fatalf("outcome %q saturated %v more %d: %s", r.Outcome, r.SaturatedAgents, r.MoreAgents, r.Message)
	}
	if last := r.Steps[len(r.Steps)-1]; last.Verdict != "inconclusive" || last.Target != 4000 {
		t.Errorf("last step %+v", last)
	}
	if !strings.Contains(r.Message, "too small") || !strings.Contains(r.Message, "up to 2000") || !strings.Contains(r.Message, "add at least 1 agent (2 → 3)") {
		t.Errorf("message %q", r.Message)
	}
	runLevel := func(_ context.Context, x float64, _ int) (Outcome, error) {
		return Outcome{AchievedRPS: x, SLOValues: []float64{1000}, SLOPass: []bool{true}, ClientBound: true, ClientBoundReasons: []string{"send lateness p99 10ms exceeds 1ms"},
			AgentDemand: map[string]float64{"a1": 0.1, "a2": 0.1}, AgentClientLate: map[string]int64{"a1": 0, "a2": 30}}, nil
	}
	if r, _ = Run(context.Background(), Config{SLOs: p99Under3ms}, runLevel); r.Outcome != "inconclusive" || len(r.SaturatedAgents) != 1 || r.SaturatedAgents[0] != "a2" {
		t.Errorf("run-level reason: outcome %q, saturated %v; want a2, the agent that sent late", r.Outcome, r.SaturatedAgents)
	}
	short := func(_ context.Context, x float64, _ int) (Outcome, error) {
		return Outcome{AchievedRPS: 0.95 * x, SLOValues: []float64{1000}, SLOPass: []bool{true}}, nil
	}
	if r, _ = Run(context.Background(), Config{SLOs: p99Under3ms}, short); r.Outcome != "inconclusive" || r.Steps[0].Verdict != "inconclusive" {
		t.Errorf("5 %% short: outcome %q, first step %+v", r.Outcome, r.Steps[0])
	}
}

// TestBounded: --max-steps ends the search with what it found so far,
// and a cancelled context (Ctrl-C) as well.
func TestBounded(t *testing.T) {
	calls := 0
	r, err := Run(context.Background(), Config{SLOs: p99Under3ms, MaxSteps: 5}, modelled(4000, &calls))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != "stopped" || len(r.Steps) != 5 || !strings.Contains(r.Message, "--max-steps 5") || !strings.Contains(r.Message, "between") {
		t.Errorf("max steps: outcome %q, %d steps, %q", r.Outcome, len(r.Steps), r.Message)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	stopAfter2 := func(c context.Context, x float64, rep int) (Outcome, error) {
		if n++; n == 2 {
			cancel()
		}
		return modelled(4000, &calls)(c, x, rep)
	}
	if r, err = Run(ctx, Config{SLOs: p99Under3ms}, stopAfter2); err != nil || r.Outcome != "stopped" || len(r.Steps) != 2 {
		t.Errorf("cancelled: err %v outcome %q, %d steps", err, r.Outcome, len(r.Steps))
	}
	if _, err := Run(context.Background(), Config{}, stopAfter2); err == nil {
		t.Error("no SLO: nil error")
	}
}

func writeText(b *strings.Builder, r *report.Search) error { return report.WriteSearchText(b, r) }
