package engine

import (
	"math"
	"time"

	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// MissThreshold is how late an open-loop send may start before it counts
// as missed (measure.MissThreshold, where the report reads it too).
const MissThreshold = measure.MissThreshold

// segment is a linear piece of a target function: from `from` at start to
// `to` at start+dur. n0 is the cumulative count (the integral of a rate)
// at start.
type segment struct {
	start, dur time.Duration
	from, to   float64
	n0         float64
}

// schedule is one worker's target over time, as offsets from the start
// instant: the base value through the warm-up, then one linear segment per
// stage (or the base value for the whole window). It is a rate (requests/s)
// in open loop and a connection count in closed loop. end is the
// schedule's end; zero means unbounded (count mode without a duration).
type schedule struct {
	segs []segment
	end  time.Duration
}

// newSchedule builds a worker's schedule: base is its part of the plan's
// rate or connections, targets its parts of the stage targets.
func newSchedule(p plan.Plan, base float64, targets []float64) schedule {
	var s schedule
	t := time.Duration(0)
	add := func(dur time.Duration, from, to float64) {
		n0 := 0.0
		if len(s.segs) > 0 {
			last := s.segs[len(s.segs)-1]
			n0 = last.n0 + (last.from+last.to)/2*last.dur.Seconds()
		}
		s.segs = append(s.segs, segment{start: t, dur: dur, from: from, to: to, n0: n0})
		t += dur
	}
	if p.Warmup > 0 {
		add(p.Warmup, base, base)
	}
	if len(targets) == 0 {
		if p.Duration > 0 {
			add(p.Duration, base, base)
			s.end = t
		} else {
			add(time.Duration(math.MaxInt64/2), base, base)
		}
		return s
	}
	prev := base
	for i, sp := range p.StageSpans() { // the stages' bounds; targets are this worker's parts
		add(sp.End-sp.Start, prev, targets[i])
		prev = targets[i]
	}
	s.end = t
	return s
}

// value returns the target at offset t.
func (s *schedule) value(t time.Duration) float64 {
	for _, g := range s.segs {
		if t < g.start+g.dur {
			if g.dur <= 0 {
				return g.to
			}
			f := float64(t-g.start) / float64(g.dur)
			return g.from + (g.to-g.from)*f
		}
	}
	if n := len(s.segs); n > 0 {
		return s.segs[n-1].to
	}
	return 0
}

// reaches returns the earliest offset t >= from at which the target is v or
// more (value(t) >= v, to within 1e-9), or false when it never is again: a
// closed-loop slot j is active while the connection target exceeds j, so
// reaches(j, now) is when it may send next.
func (s *schedule) reaches(v float64, from time.Duration) (time.Duration, bool) {
	const eps = 1e-9
	if s.value(from) >= v-eps {
		return from, true
	}
	for _, g := range s.segs {
		end := g.start + g.dur
		if end <= from || g.to < v-eps {
			continue // over, or below v throughout (it is linear)
		}
		// g.from < v <= g.to: rising through v within the segment.
		tau := time.Duration(math.Ceil((v - g.from) / (g.to - g.from) * float64(g.dur)))
		return max(g.start+tau, from), true
	}
	return 0, false
}

// at returns the offset at which the cumulative count (the integral of the
// rate) reaches n, or false when the schedule ends first.
func (s *schedule) at(n float64) (time.Duration, bool) {
	for _, g := range s.segs {
		d := g.dur.Seconds()
		total := (g.from + g.to) / 2 * d
		if n > g.n0+total {
			continue
		}
		x := n - g.n0 // requests into this segment
		var tau float64
		if g.to == g.from {
			if g.from <= 0 {
				continue
			}
			tau = x / g.from
		} else {
			// from·τ + (to−from)·τ²/(2d) = x
			a := (g.to - g.from) / (2 * d)
			disc := g.from*g.from + 4*a*x
			if disc < 0 {
				disc = 0
			}
			tau = (-g.from + math.Sqrt(disc)) / (2 * a)
		}
		return g.start + time.Duration(tau*float64(time.Second)), true
	}
	return 0, false
}

// cumulative returns the integral of the rate from 0 to offset t: the
// number of requests the schedule has due by then.
func (s *schedule) cumulative(t time.Duration) float64 {
	n := 0.0
	for _, g := range s.segs {
		if t <= g.start {
			break
		}
		tau := min(t-g.start, g.dur).Seconds()
		d := g.dur.Seconds()
		n = g.n0 + g.from*tau
		if d > 0 {
			n += (g.to - g.from) * tau * tau / (2 * d)
		}
	}
	return n
}
