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
	p := plan.Plan{Stages: []plan.Stage{{Duration: 10 * time.Second, Rate: 100}, {Duration: 5 * time.Second, Rate: 100}}}
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
