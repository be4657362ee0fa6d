package coordinator

import (
	"errors"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/merge"
	"github.com/phalanxload/phalanx/internal/plan"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// TestResultAssembly: the result step, from agents' state alone: issued
// and in flight from Done (or, for a failed agent, its reported outcomes),
// the start skew and stage change skew in the coordinator's clock (each
// agent's instants shifted by its clock offset), the window of a stopped
// run and its stages cut to it.
func TestResultAssembly(t *testing.T) {
	p := plan.Plan{URL: "https://127.0.0.1/", Connections: 4, Interval: time.Second, Load: plan.OpenLoop, Rate: 100,
		Stages: []plan.Stage{{Duration: 2 * time.Second, Rate: 100}, {Duration: 2 * time.Second, Rate: 200}}}
	p.SetDefaults()
	startAt := time.Unix(1000, 0)
	offset := 50 * time.Millisecond // agent b's clock runs 50 ms ahead
	a := &agentRun{meta: &pb.NodeMeta{Name: "a"}, done: &pb.Done{
		Issued: 12, InFlight: 2, Stopped: true,
		FirstSendUnixNano:   startAt.Add(100 * time.Microsecond).UnixNano(),
		WindowEndUnixNano:   startAt.Add(3 * time.Second).UnixNano(),
		StageChangeUnixNano: []int64{startAt.Add(2*time.Second + time.Millisecond).UnixNano()},
	}}
	a.counters.Requests = 10
	b := &agentRun{meta: &pb.NodeMeta{Name: "b"}, offset: offset, done: &pb.Done{
		Issued: 5, Stopped: true,
		FirstSendUnixNano:   startAt.Add(offset + 400*time.Microsecond).UnixNano(),
		WindowEndUnixNano:   startAt.Add(offset + 2500*time.Millisecond).UnixNano(),
		StageChangeUnixNano: []int64{startAt.Add(offset + 2*time.Second + 4*time.Millisecond).UnixNano()},
	}}
	b.counters.Requests = 5
	c := &agentRun{meta: &pb.NodeMeta{Name: "c"}, err: errors.New("agent c: stream ended without a result")}
	c.counters.Requests = 3
	c.counters.Errors[0] = 1
	rn := &run{id: "r", p: p, log: slog.Default(), agents: []*agentRun{a, b, c}, m: merge.New(p, 3), startAt: startAt, userStop: true}
	res, err := rn.result()
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetCounters().GetIssued(); got != 12+5+4 {
		t.Errorf("issued %d, want 21 (c's reported outcomes count as issued)", got)
	}
	if res.GetInFlight() != 2 || res.GetAgents()[2].GetError() == "" || res.GetAgents()[2].GetIssued() != 4 {
		t.Errorf("in flight %d, c's row %+v", res.GetInFlight(), res.GetAgents()[2])
	}
	if got := res.GetStartSkew().AsDuration(); got != 300*time.Microsecond {
		t.Errorf("start skew %v, want 300us", got)
	}
	if got := res.GetAgents()[1].GetStartOffset().AsDuration(); got != 400*time.Microsecond {
		t.Errorf("b's start offset %v, want 400us", got)
	}
	if ra, rb := res.GetAgents()[0].GetRan(), res.GetAgents()[1].GetRan(); ra.AsDuration() != 3*time.Second || rb.AsDuration() != 2500*time.Millisecond || res.GetAgents()[2].GetRan() != nil {
		t.Errorf("ran: a %v, b %v, c %v; want each agent's own window from its Done (3s, 2.5s) and none for c", ra, rb, res.GetAgents()[2].GetRan())
	}
	if !res.GetStoppedEarly() || res.GetWindow().AsDuration() != 3*time.Second {
		t.Errorf("stopped %v, window %v; want true, 3s", res.GetStoppedEarly(), res.GetWindow().AsDuration())
	}
	st := res.GetStages()
	if len(st) != 2 || st[0].GetDuration().AsDuration() != 2*time.Second || st[1].GetDuration().AsDuration() != time.Second {
		t.Fatalf("stages %v", st)
	}
	if got := st[1].GetChangeSkew().AsDuration(); got != 3*time.Millisecond {
		t.Errorf("stage 1 change skew %v, want 3ms", got)
	}
}

// TestResultOfLostAgents: agents lost mid-run (as when the coordinator
// stalled and every stream ended) make the result partial, with a window
// that ends at the last interval received, never the planned one, lost
// rows that say when and how long their load ran (and when it started, as
// far as their intervals said), and stages cut to the window; an abort
// marks the result aborted, not stopped early.
func TestResultOfLostAgents(t *testing.T) {
	p := plan.Plan{URL: "https://127.0.0.1/", Connections: 4, Duration: 20 * time.Second, Interval: time.Second,
		Stages: []plan.Stage{{Duration: 10 * time.Second, Connections: 4}, {Duration: 10 * time.Second, Connections: 8}}}
	p.SetDefaults()
	startAt := time.Unix(1000, 0)
	a := &agentRun{meta: &pb.NodeMeta{Name: "a"}, err: errors.New("agent a: stream ended (EOF)"), lost: true,
		lostAt: 9 * time.Second, lastEnd: 6 * time.Second, intervals: 6, share: plan.Share{Connections: 2}}
	b := &agentRun{meta: &pb.NodeMeta{Name: "b"}, err: errors.New("agent b: stream ended (EOF)"), lost: true,
		lostAt: 9 * time.Second, lastEnd: 5 * time.Second, intervals: 5, share: plan.Share{Connections: 2},
		offset: 50 * time.Millisecond, firstSend: startAt.Add(50*time.Millisecond + 700*time.Microsecond).UnixNano()}
	rn := &run{id: "r", p: p, log: slog.Default(), agents: []*agentRun{a, b}, m: merge.New(p, 2), startAt: startAt,
		stall: 3 * time.Second}
	res, err := rn.result()
	if err != nil {
		t.Fatal(err)
	}
	if !res.GetPartial() || res.GetStoppedEarly() || res.GetAborted() {
		t.Errorf("partial %v, stopped early %v, aborted %v; want true, false, false", res.GetPartial(), res.GetStoppedEarly(), res.GetAborted())
	}
	if got := res.GetWindow().AsDuration(); got != 6*time.Second {
		t.Errorf("window %v, want 6s (the last interval received), not the planned 20s", got)
	}
	if got := res.GetCoordinatorStall().AsDuration(); got != 3*time.Second {
		t.Errorf("coordinator stall %v, want 3s", got)
	}
	ar := res.GetAgents()[1]
	if !ar.GetLost() || ar.GetLostAt().AsDuration() != 9*time.Second || ar.GetRan().AsDuration() != 5*time.Second || ar.GetError() == "" {
		t.Errorf("b's row %+v: want lost at 9s, ran 5s, with its error", ar)
	}
	if ar.GetStartOffset() == nil || ar.GetStartOffset().AsDuration() != 700*time.Microsecond || res.GetAgents()[0].GetStartOffset() != nil {
		t.Errorf("start offsets: b %v (want 700us, from its intervals' first send in the coordinator's clock), a %v (want none: no interval gave one)",
			ar.GetStartOffset(), res.GetAgents()[0].GetStartOffset())
	}
	if st := res.GetStages(); len(st) != 2 || st[0].GetDuration().AsDuration() != 6*time.Second || st[1].GetDuration().AsDuration() != 0 {
		t.Errorf("stages %v, want cut to the 6 s window", st)
	}

	// The same with continue: an agent that ran its whole share keeps the
	// planned window.
	c := &agentRun{meta: &pb.NodeMeta{Name: "c"}, done: &pb.Done{WindowEndUnixNano: startAt.Add(20 * time.Second).UnixNano()}}
	rn = &run{id: "r", p: p, log: slog.Default(), agents: []*agentRun{a, c}, m: merge.New(p, 2), startAt: startAt}
	if res, err = rn.result(); err != nil {
		t.Fatal(err)
	}
	if !res.GetPartial() || res.GetWindow().AsDuration() != 20*time.Second {
		t.Errorf("continue: partial %v, window %v; want true, 20s", res.GetPartial(), res.GetWindow().AsDuration())
	}

	// An abort: the other agent stopped early by the policy.
	c.done = &pb.Done{Stopped: true, WindowEndUnixNano: startAt.Add(9*time.Second + 300*time.Millisecond).UnixNano()}
	rn = &run{id: "r", p: p, log: slog.Default(), agents: []*agentRun{a, c}, m: merge.New(p, 2), startAt: startAt, aborted: true}
	if res, err = rn.result(); err != nil {
		t.Fatal(err)
	}
	if !res.GetAborted() || res.GetStoppedEarly() || res.GetWindow().AsDuration() != 9300*time.Millisecond {
		t.Errorf("abort: aborted %v, stopped early %v, window %v; want true, false, 9.3s", res.GetAborted(), res.GetStoppedEarly(), res.GetWindow().AsDuration())
	}
}

// TestRateSamples: an agent's Req/Sec samples are its intervals' rates, a
// last interval shorter than a whole one (count mode's, a stop's) folded
// into the one before, so that the samples span the agent's own window
// as its row's rate does; an agent whose one interval is short keeps it.
func TestRateSamples(t *testing.T) {
	const iv = time.Second
	for _, tc := range []struct {
		name string
		reqs []int64
		lens []time.Duration
		want []float64
	}{
		{"whole intervals", []int64{100, 200}, []time.Duration{iv, iv}, []float64{100, 200}},
		{"a short tail", []int64{100, 200, 50}, []time.Duration{iv, iv, 250 * time.Millisecond}, []float64{100, 200}},
		{"one short interval", []int64{90}, []time.Duration{900 * time.Millisecond}, []float64{100}},
	} {
		var r agentRun
		for i := range tc.reqs {
			r.addRateSample(tc.reqs[i], tc.lens[i], iv)
		}
		if !reflect.DeepEqual(r.intervalRPS, tc.want) {
			t.Errorf("%s: addRateSample(%v, %v) = %v, want %v", tc.name, tc.reqs, tc.lens, r.intervalRPS, tc.want)
		}
	}
}
