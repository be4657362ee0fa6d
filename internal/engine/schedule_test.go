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
