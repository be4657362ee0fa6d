package engine

import (
	"math"
	"testing"
	"time"

	"github.com/phalanxload/phalanx/internal/plan"
)

func TestScheduleConstantRate(t *testing.T) {
	s := newSchedule(plan.Plan{Duration: 10 * time.Second}, 100, nil)
	for _, k := range []float64{0.5, 1, 250, 999.5} {
		got, ok := s.at(k)
		want := time.Duration(k / 100 * float64(time.Second))
		if !ok || absDur(got-want) > time.Microsecond {
			t.Errorf("at(%v) = %v, %v; want %v", k, got, ok, want)
		}
	}
	if _, ok := s.at(1000.5); ok {
		t.Errorf("at(1000.5) past a 10 s window at 100/s should end the schedule")
	}
}

// TestScheduleRamp: a ramp from 0 to 100/s over 10 s sends 500 requests,
// the k-th at sqrt(2k·10/100) s.
func TestScheduleRamp(t *testing.T) {
	p := plan.Plan{Load: plan.OpenLoop, Stages: []plan.Stage{{Duration: 10 * time.Second, Rate: 100}, {Duration: 5 * time.Second, Rate: 100}}}
	s := newSchedule(p, 0, []float64{100, 100})
	for _, k := range []float64{1, 50, 200, 499.9} {
		got, _ := s.at(k)
		want := time.Duration(math.Sqrt(2*k*10/100) * float64(time.Second))
		if absDur(got-want) > 10*time.Microsecond {
			t.Errorf("at(%v) = %v, want %v", k, got, want)
		}
	}
	if got, _ := s.at(600); absDur(got-11*time.Second) > 10*time.Microsecond {
		t.Errorf("at(600) = %v, want 11s (500 in the ramp, then 100/s)", got)
	}
	if v := s.value(5 * time.Second); v != 50 {
		t.Errorf("value(5s) = %v, want 50", v)
	}
	if _, ok := s.at(1000.5); ok {
		t.Error("schedule should end after 1000 requests")
	}
}

func TestScheduleWarmup(t *testing.T) {
	s := newSchedule(plan.Plan{Warmup: time.Second, Duration: 2 * time.Second}, 10, nil)
	if got, _ := s.at(15); absDur(got-1500*time.Millisecond) > time.Microsecond {
		t.Errorf("at(15) = %v, want 1.5s", got)
	}
	if s.end != 3*time.Second {
		t.Errorf("end = %v", s.end)
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// TestScheduleReaches: when a connection target (held at 2, ramped to 6
// over 4 s, ramped down to 1 over 1 s) first reaches a value from a given
// offset; a closed-loop slot j waits for reaches(j+1), so slot 2 starts
// when the ramp passes 3.
func TestScheduleReaches(t *testing.T) {
	p := plan.Plan{Stages: []plan.Stage{
		{Duration: time.Second, Connections: 2},
		{Duration: 4 * time.Second, Connections: 6},
		{Duration: time.Second, Connections: 1},
	}}
	s := newSchedule(p, 2, []float64{2, 6, 1})
	for _, c := range []struct {
		v    float64
		from time.Duration
		want time.Duration
		ok   bool
	}{
		{2, 0, 0, true},                                             // held from the start
		{3, 0, 2 * time.Second, true},                               // 2 + (t-1 s)·1/s = 3
		{3, 300 * time.Millisecond, 2 * time.Second, true},          //
		{6, 0, 5 * time.Second, true},                               // the ramp's end
		{4, 5500 * time.Millisecond, 0, false},                      // ramping down: never again
		{1, 5500 * time.Millisecond, 5500 * time.Millisecond, true}, // still above 1
		{7, 0, 0, false},                                            // never that high
		{2.5, 1500 * time.Millisecond, 1500 * time.Millisecond, true},
	} {
		got, ok := s.reaches(c.v, c.from)
		if ok != c.ok || ok && absDur(got-c.want) > time.Microsecond {
			t.Errorf("reaches(%v, %v) = %v, %v; want %v, %v", c.v, c.from, got, ok, c.want, c.ok)
		}
	}
}

// TestFirstActivation: of the slots a closed-loop ramp activates, only its
// worker's lowest (the one whose predecessor was active when the stage
// began) waits at the instant's precision; none in the first stage.
func TestFirstActivation(t *testing.T) {
	p := plan.Plan{URL: "https://127.0.0.1:1/", Connections: 2, Interval: 200 * time.Millisecond,
		Stages: []plan.Stage{{Duration: 600 * time.Millisecond, Connections: 2}, {Duration: 800 * time.Millisecond, Connections: 8}, {Duration: 400 * time.Millisecond, Connections: 8}}}
	e := newEngine(t, p, 2) // 2 workers, each 1, ramped to 4 (3.75/s): slot 1 at 0.867 s, 2 at 1.133 s
	w := e.workers[0]
	cases := []struct {
		j    int
		off  time.Duration
		want bool
	}{
		{1, 867 * time.Millisecond, true},   // the ramp's first: slot 0 was active at 0.6 s
		{2, 1133 * time.Millisecond, false}, // the ramp's second
		{1, 300 * time.Millisecond, false},  // in the first stage: the start's, not a change
	}
	for _, c := range cases {
		if got := e.firstActivation(w, c.j, c.off); got != c.want {
			t.Errorf("firstActivation(slot %d at %v) = %v, want %v", c.j, c.off, got, c.want)
		}
	}
}

// TestClassifyLate: a paced send's lateness is judged against both its
// intended time and its connection's freeing: a wait for a busy
// connection queues it (and, over MissThreshold, backlogs it) but never
// makes it client-late; a delay after both is the client's.
func TestClassifyLate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	for _, c := range []struct {
		name                                   string
		free, sent                             time.Duration // from t0
		queued, clientLate, missed, backlogged bool
	}{
		{"on time", -ms, 20 * time.Microsecond, false, false, false, false},
		{"own delay at the limit", -ms, ms, false, false, false, false},
		{"own delay over the limit", -ms, ms + time.Microsecond, false, true, false, false},
		{"own delay over the miss threshold", -ms, 6 * ms, false, true, true, false},
		{"waited 3 ms for its connection", 3 * ms, 3*ms + 10*time.Microsecond, true, false, false, false},
		{"waited 8 ms for its connection", 8 * ms, 8*ms + 10*time.Microsecond, true, false, true, true},
		{"waited 2 ms, then 2 ms of its own", 2 * ms, 4 * ms, true, true, false, false},
		{"waited 2 ms, then 6 ms of its own", 2 * ms, 8 * ms, true, true, true, false},
	} {
		o := outcome{free: t0.Add(c.free), sent: t0.Add(c.sent)}
		o.classifyLate(t0)
		if o.queued != c.queued || o.clientLate != c.clientLate || o.missed != c.missed || o.backlogged != c.backlogged {
			t.Errorf("%s: queued %v, client-late %v, missed %v, backlogged %v; want %v, %v, %v, %v", c.name,
				o.queued, o.clientLate, o.missed, o.backlogged, c.queued, c.clientLate, c.missed, c.backlogged)
		}
	}
}
