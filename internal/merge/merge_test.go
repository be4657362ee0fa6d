package merge

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// sample is one completed request: its end's offset in the window, its
// latency and its send lateness.
type sample struct {
	at   time.Duration
	us   int64
	late int64
}

func samples(r *rand.Rand, n int, window time.Duration) []sample {
	out := make([]sample, n)
	for i := range out {
		us := int64(50 + r.ExpFloat64()*800)
		if r.IntN(200) == 0 {
			us = 10_000 + r.Int64N(5_000_000) // a slow tail
		}
		late := int64(1 + r.ExpFloat64()*15)
		if r.IntN(100) == 0 {
			late = 1_000 + r.Int64N(50_000) // a starved or overloaded agent
		}
		out[i] = sample{at: time.Duration(r.Int64N(int64(window))), us: us, late: late}
	}
	return out
}

func encode(t *testing.T, h *hist.Histogram) []byte {
	t.Helper()
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// split records the samples as agents × workers recorders would, one
// histogram set per (agent, worker, interval), merges each agent's workers
// into its interval as the engine does, and returns the agents' intervals
// in a random arrival order (V2 uncompressed, as agents send them).
func split(t *testing.T, r *rand.Rand, ss []sample, agents, workers int, interval time.Duration, intervals int) []*Interval {
	t.Helper()
	type key struct{ a, w, k int }
	sets := map[key]*hist.Set{}
	counts := map[key]*measure.Counts{}
	for _, s := range ss {
		k := key{r.IntN(agents), r.IntN(workers), int(s.at / interval)}
		if sets[k] == nil {
			sets[k], counts[k] = hist.NewSet(), &measure.Counts{}
		}
		sets[k].Latency.RecordMicros(s.us)
		sets[k].TTFB.RecordMicros(s.us / 2)
		if s.us%7 == 0 { // a request that opened its connection
			sets[k].Connect.RecordMicros(s.us / 3)
		}
		sets[k].Lateness.RecordMicros(s.late)
		sets[k].Service.RecordMicros(max(s.us-s.late, 1))
		counts[k].Requests++
		counts[k].Status[200]++
	}
	var out []*Interval
	for a := range agents {
		for k := range intervals {
			merged, c := hist.NewSet(), &measure.Counts{}
			for w := range workers {
				if s := sets[key{a, w, k}]; s != nil {
					if err := merged.Merge(s); err != nil {
						t.Fatal(err)
					}
					c.Add(counts[key{a, w, k}])
				}
			}
			iv := &Interval{Agent: a, Index: k, Start: time.Duration(k) * interval, Length: interval, Counts: c, CPUTime: interval / 4, CPUs: 2}
			for kind := range hist.NumKinds {
				iv.Histograms[kind] = merged.Get(kind).EncodeV2()
			}
			out = append(out, iv)
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestAnySplitMergesToOneRecorder: however the same samples are split
// across agents, workers and intervals, and in whatever order the
// intervals arrive, the window's, each interval's and each stage's merged
// latency, and the window's and each interval's send lateness and service
// time, and each interval's phases (TTFB, connect; none of TLS resumed),
// equal one recorder's histogram of the same samples.
func TestAnySplitMergesToOneRecorder(t *testing.T) {
	const interval = 100 * time.Millisecond
	const intervals = 10
	window := interval * intervals
	p := plan.Plan{URL: "https://127.0.0.1/", Connections: 8, Interval: interval, Load: plan.OpenLoop, Rate: 100,
		Stages: []plan.Stage{{Duration: 300 * time.Millisecond, Rate: 400}, {Duration: 700 * time.Millisecond, Rate: 400}}}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		ss := samples(r, 500+r.IntN(3000), window)
		whole, perInterval, perStage := hist.New(), make([]*hist.Histogram, intervals), []*hist.Histogram{hist.New(), hist.New()}
		late, lateInterval, serviceInterval := hist.New(), make([]*hist.Histogram, intervals), make([]*hist.Histogram, intervals)
		ttfbInterval, connectInterval := make([]*hist.Histogram, intervals), make([]*hist.Histogram, intervals)
		for i := range perInterval {
			perInterval[i], lateInterval[i], serviceInterval[i] = hist.New(), hist.New(), hist.New()
			ttfbInterval[i], connectInterval[i] = hist.New(), hist.New()
		}
		for _, s := range ss {
			whole.RecordMicros(s.us)
			late.RecordMicros(s.late)
			k := int(s.at / interval)
			perInterval[k].RecordMicros(s.us)
			lateInterval[k].RecordMicros(s.late)
			serviceInterval[k].RecordMicros(max(s.us-s.late, 1))
			ttfbInterval[k].RecordMicros(s.us / 2)
			if s.us%7 == 0 {
				connectInterval[k].RecordMicros(s.us / 3)
			}
			if time.Duration(k)*interval < 300*time.Millisecond {
				perStage[0].RecordMicros(s.us)
			} else {
				perStage[1].RecordMicros(s.us)
			}
		}
		agents, workers := 1+r.IntN(5), 1+r.IntN(4)
		m := New(p, agents)
		completed := 0
		for _, iv := range split(t, r, ss, agents, workers, interval, intervals) {
			pt, err := m.Add(iv)
			if err != nil {
				t.Fatal(err)
			}
			if pt != nil {
				completed++
			}
		}
		if completed != intervals {
			t.Errorf("seed %d: %d points completed, want %d", seed, completed, intervals)
		}
		if !bytes.Equal(encode(t, m.Total().Latency), encode(t, whole)) {
			t.Errorf("seed %d (%d agents, %d workers): window latency differs from one recorder's", seed, agents, workers)
		}
		if !bytes.Equal(encode(t, m.Total().Lateness), encode(t, late)) {
			t.Errorf("seed %d (%d agents, %d workers): window send lateness differs from one recorder's", seed, agents, workers)
		}
		if m.Total().TTFB.Count() != int64(len(ss)) || m.Counts().Requests != int64(len(ss)) {
			t.Errorf("seed %d: ttfb %d, requests %d, want %d", seed, m.Total().TTFB.Count(), m.Counts().Requests, len(ss))
		}
		tl, err := m.Timeline()
		if err != nil {
			t.Fatal(err)
		}
		for i, pt := range tl {
			if pt.Index != i || pt.Start != time.Duration(i)*interval || pt.Length != interval {
				t.Errorf("seed %d: point %d is %+v", seed, i, pt)
			}
			if !bytes.Equal(pt.Latency, encode(t, perInterval[i])) || pt.Requests != perInterval[i].Count() {
				t.Errorf("seed %d: interval %d latency differs from one recorder's", seed, i)
			}
			if !bytes.Equal(pt.Lateness, encode(t, lateInterval[i])) {
				t.Errorf("seed %d: interval %d send lateness differs from one recorder's", seed, i)
			}
			if !bytes.Equal(pt.Service, encode(t, serviceInterval[i])) {
				t.Errorf("seed %d: interval %d service time differs from one recorder's", seed, i)
			}
			if !bytes.Equal(pt.Phases[hist.TTFB], encode(t, ttfbInterval[i])) {
				t.Errorf("seed %d: interval %d TTFB differs from one recorder's", seed, i)
			}
			if c := connectInterval[i]; c.Count() > 0 && !bytes.Equal(pt.Phases[hist.Connect], encode(t, c)) || c.Count() == 0 && pt.Phases[hist.Connect] != nil {
				t.Errorf("seed %d: interval %d connect (%d bytes) differs from one recorder's (%d samples)", seed, i, len(pt.Phases[hist.Connect]), c.Count())
			}
			if pt.Phases[hist.TLSResumed] != nil || pt.Phases[hist.Latency] != nil {
				t.Errorf("seed %d: interval %d keeps a TLS resumed histogram without a sample, or latency among the phases", seed, i)
			}
			if len(pt.CPUBusy) != agents || pt.CPUBusy[0] != 0.125 {
				t.Errorf("seed %d: interval %d cpu busy %v", seed, i, pt.CPUBusy)
			}
		}
		for i, st := range m.Stages() {
			if !bytes.Equal(encode(t, st.Latency), encode(t, perStage[i])) || st.Counts.Requests != perStage[i].Count() {
				t.Errorf("seed %d: stage %d latency differs from one recorder's", seed, i)
			}
		}
	}
}

// TestStagesAndTargets: the stages are plan.StageSpans', an interval
// belongs to the stage it starts in, and open-loop points carry the plan's
// target at their middle.
func TestStagesAndTargets(t *testing.T) {
	p := plan.Plan{Connections: 4, Interval: time.Second, Load: plan.OpenLoop, Rate: 100,
		Stages: []plan.Stage{{Duration: 2 * time.Second, Rate: 300}, {Duration: 2 * time.Second, Rate: 300}}}
	m := New(p, 1)
	st := m.Stages()
	if len(st) != 2 || st[0].Start != 0 || st[0].Duration != 2*time.Second || st[0].From != 100 || st[0].To != 300 ||
		st[1].Start != 2*time.Second || st[1].From != 300 || st[1].To != 300 {
		t.Fatalf("stages %+v %+v", st[0], st[1])
	}
	empty := hist.New().EncodeV2()
	for k := range 4 {
		iv := &Interval{Index: k, Start: time.Duration(k) * time.Second, Length: time.Second, Counts: &measure.Counts{Errors: [measure.NumErrorKinds]int64{measure.ErrReset: int64(k)},
			Missed: int64(2 * k), Backlogged: int64(k), GrowthRefused: int64(k)}}
		for kind := range hist.NumKinds {
			iv.Histograms[kind] = empty
		}
		pt, err := m.Add(iv)
		if err != nil || pt == nil {
			t.Fatalf("interval %d: %v, %v", k, pt, err)
		}
		want := []float64{150, 250, 300, 300}[k]
		if pt.TargetRPS != want || pt.Errors != int64(k) || pt.Backlogged != int64(k) || pt.GrowthRefused != int64(k) {
			t.Errorf("interval %d: target %v, errors %d, backlogged %d, growth refused %d; want %v and %d each", k, pt.TargetRPS, pt.Errors, pt.Backlogged, pt.GrowthRefused, want, k)
		}
	}
	st = m.Stages()
	if st[0].Counts.ErrorTotal() != 1 || st[1].Counts.ErrorTotal() != 5 {
		t.Errorf("stage errors %d, %d; want 1, 5", st[0].Counts.ErrorTotal(), st[1].Counts.ErrorTotal())
	}
}

func TestAddRejectsCorruptOrMismatched(t *testing.T) {
	m := New(plan.Plan{Connections: 1, Interval: time.Second}, 1)
	h := hist.New()
	h.RecordMicros(10)
	iv := &Interval{Counts: &measure.Counts{Requests: 2}}
	for kind := range hist.NumKinds {
		iv.Histograms[kind] = h.EncodeV2()
	}
	if _, err := m.Add(iv); err == nil {
		t.Error("latency of 1 sample with 2 requests accepted")
	}
	iv.Counts.Requests = 1
	iv.Histograms[hist.TTFB] = []byte("garbage")
	if _, err := m.Add(iv); err == nil {
		t.Error("corrupt ttfb histogram accepted")
	}
	if m.Total().Latency.Count() != 0 || m.Counts().Requests != 0 {
		t.Error("a rejected interval was merged")
	}
	if tl, err := m.Timeline(); err != nil || len(tl) != 0 {
		t.Errorf("a rejected interval left a timeline point: %d points, %v", len(tl), err)
	}
}

// TestRejectedIntervalLeavesOthersWhole: an agent's interval refused
// after its first histograms were added (a corrupt one later in the set,
// or a latency count its counters contradict) takes nothing into an
// interval another agent already sent, nor into the window; the agent's
// good interval then completes the point with both agents' samples.
func TestRejectedIntervalLeavesOthersWhole(t *testing.T) {
	m := New(plan.Plan{Connections: 2, Interval: time.Second, Duration: 10 * time.Second}, 2)
	interval := func(agent int, us ...int64) *Interval {
		h := hist.New()
		for _, v := range us {
			h.RecordMicros(v)
		}
		iv := &Interval{Agent: agent, Length: time.Second, Counts: &measure.Counts{Requests: int64(len(us))}}
		for kind := range hist.NumKinds {
			iv.Histograms[kind] = hist.New().EncodeV2()
		}
		iv.Histograms[hist.Latency], iv.Histograms[hist.TTFB] = h.EncodeV2(), h.EncodeV2()
		return iv
	}
	if pt, err := m.Add(interval(0, 100, 200, 300)); err != nil || pt != nil {
		t.Fatalf("agent 0: %v, %v", pt, err)
	}
	bad := interval(1, 5000, 6000)
	bad.Histograms[hist.Lateness] = []byte("garbage") // after latency and TTFB
	if _, err := m.Add(bad); err == nil {
		t.Fatal("a corrupt lateness histogram accepted")
	}
	mismatched := interval(1, 5000, 6000)
	mismatched.Counts.Requests = 3
	if _, err := m.Add(mismatched); err == nil {
		t.Fatal("2 latency samples with 3 requests accepted")
	}
	if tot := m.Total(); tot.Latency.Count() != 3 || tot.TTFB.Count() != 3 || tot.Latency.Max() > 400 {
		t.Fatalf("window after the refusals: latency %d samples (max %d), ttfb %d; want agent 0's 3", tot.Latency.Count(), tot.Latency.Max(), tot.TTFB.Count())
	}
	pt, err := m.Add(interval(1, 5000, 6000))
	if err != nil || pt == nil {
		t.Fatalf("agent 1: %v, %v", pt, err)
	}
	lat, err := hist.Decode(pt.Latency)
	if err != nil || lat.Count() != 5 || lat.Max() < 5000 || pt.Requests != 5 {
		t.Fatalf("point: %v samples, %d requests (%v); want 5", lat.Count(), pt.Requests, err)
	}
	if tot := m.Total(); tot.Latency.Count() != 5 || tot.TTFB.Count() != 5 {
		t.Fatalf("window: latency %d, ttfb %d samples; want 5", tot.Latency.Count(), tot.TTFB.Count())
	}
}

// TestTimelineFinishesMissingAgents: an interval some agent never sent
// (it failed) still becomes a point, with what the others sent.
func TestTimelineFinishesMissingAgents(t *testing.T) {
	m := New(plan.Plan{Connections: 2, Interval: time.Second}, 2)
	h := hist.New()
	h.RecordMicros(100)
	iv := &Interval{Agent: 1, Index: 0, Length: time.Second, Counts: &measure.Counts{Requests: 1}}
	for kind := range hist.NumKinds {
		iv.Histograms[kind] = h.EncodeV2()
	}
	if pt, err := m.Add(iv); err != nil || pt != nil {
		t.Fatalf("half an interval: %v, %v", pt, err)
	}
	tl, err := m.Timeline()
	if err != nil || len(tl) != 1 || tl[0].Requests != 1 || tl[0].P99 != 100 || tl[0].Lateness != nil || tl[0].Service != nil {
		t.Fatalf("timeline %v, %v", tl, err)
	}
}

func TestWindowAndCut(t *testing.T) {
	for _, c := range []struct {
		planned time.Duration
		ends    []time.Duration
		stopped bool
		want    time.Duration
	}{
		{10 * time.Second, nil, false, 10 * time.Second},                                                              // no agent reported an end
		{10 * time.Second, []time.Duration{9 * time.Second, 9500 * time.Millisecond}, false, 9500 * time.Millisecond}, // count mode: the last end
		{10 * time.Second, []time.Duration{0}, false, 10 * time.Second},                                               // an end at the start, not stopped
		{10 * time.Second, []time.Duration{0}, true, 0},                                                               // stopped before anything ended
		{10 * time.Second, []time.Duration{3 * time.Second}, true, 3 * time.Second},
	} {
		if got := Window(c.planned, c.ends, c.stopped); got != c.want {
			t.Errorf("Window(%v, %v, %v) = %v, want %v", c.planned, c.ends, c.stopped, got, c.want)
		}
	}
	p := plan.Plan{Connections: 4, Interval: time.Second, Stages: []plan.Stage{{Duration: 2 * time.Second, Connections: 4}, {Duration: 2 * time.Second, Connections: 8}, {Duration: 2 * time.Second, Connections: 8}}}
	st := New(p, 1).Stages()
	Cut(st, 3500*time.Millisecond)
	if st[0].Duration != 2*time.Second || st[1].Duration != 1500*time.Millisecond || st[2].Duration != 0 {
		t.Errorf("cut at 3.5s: %v %v %v", st[0].Duration, st[1].Duration, st[2].Duration)
	}
}

// TestLoseKeepsTimelineFlowing loses agent 1 of 3 (open loop, 300 req/s
// split 100 each) after it sent intervals 0 and 1: interval 2, which agents
// 0 and 2 had sent, completes at the loss; interval 3 completes with them
// alone; both are partial with the two agents' 200 req/s target, and every
// request agent 1 sent is kept.
func TestLoseKeepsTimelineFlowing(t *testing.T) {
	p := plan.Plan{Load: plan.OpenLoop, Rate: 300, Connections: 3, Interval: time.Second}
	m := New(p, 3)
	add := func(a, k int, requests int64) *Point {
		t.Helper()
		h := hist.New()
		for range requests {
			h.RecordMicros(100)
		}
		iv := &Interval{Agent: a, Index: k, Start: time.Duration(k) * time.Second, Length: time.Second, Counts: &measure.Counts{Requests: requests}}
		for kind := range hist.NumKinds {
			iv.Histograms[kind] = hist.New().EncodeV2()
		}
		iv.Histograms[hist.Latency] = h.EncodeV2()
		pt, err := m.Add(iv)
		if err != nil {
			t.Fatal(err)
		}
		return pt
	}
	for k := range 2 {
		add(0, k, 10)
		add(1, k, 20)
		if pt := add(2, k, 30); pt == nil || pt.Partial || pt.Agents != 3 || pt.Requests != 60 || pt.TargetRPS != 300 {
			t.Fatalf("interval %d before the loss: %+v, want 3 agents, 60 requests, whole, target 300", k, pt)
		}
	}
	add(0, 2, 10)
	add(2, 2, 30)
	pts, err := m.Lose(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 1 || pts[0].Index != 2 || !pts[0].Partial || pts[0].Agents != 2 || pts[0].Requests != 40 || pts[0].TargetRPS != 200 {
		t.Fatalf("Lose(1) = %+v, want interval 2 partial, 2 agents, 40 requests, target 200", pts)
	}
	if again, err := m.Lose(1); err != nil || len(again) != 0 {
		t.Errorf("second Lose(1) = %v, %v; want nothing", again, err)
	}
	if pt := add(0, 3, 10); pt != nil {
		t.Fatalf("interval 3 complete with one of two live agents: %+v", pt)
	}
	if pt := add(2, 3, 30); pt == nil || !pt.Partial || pt.Agents != 2 || pt.TargetRPS != 200 {
		t.Fatalf("interval 3 = %+v, want partial with 2 agents and target 200", pt)
	}
	if c := m.Counts(); c.Requests != 2*60+40+40 {
		t.Errorf("window requests %d, want %d (everything agent 1 sent kept)", c.Requests, 2*60+40+40)
	}
	if _, err := m.Lose(3); err == nil {
		t.Error("Lose(3) of 3 agents: no error")
	}
	tl, err := m.Timeline()
	if err != nil || len(tl) != 4 {
		t.Fatalf("timeline %d points, %v; want 4", len(tl), err)
	}
}
