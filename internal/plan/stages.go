package plan

import "time"

// StageSpan is one stage placed in the measurement window: it runs from
// Start to End (offsets from the window's start, warm-up excluded) and
// ramps the target linearly from From to To (requests/s in open loop,
// connections in closed loop).
type StageSpan struct {
	Start, End time.Duration
	From, To   int64
}

// BaseTarget returns the target before any stage: Rate in open loop,
// Connections in closed loop. The first stage ramps from it; without
// stages it holds for the whole run.
func (p *Plan) BaseTarget() int64 {
	if p.Load == OpenLoop {
		return p.Rate
	}
	return int64(p.Connections)
}

// StageTarget returns stage i's target at its end: its Rate in open loop,
// its Connections in closed loop.
func (p *Plan) StageTarget(i int) int64 {
	if p.Load == OpenLoop {
		return p.Stages[i].Rate
	}
	return int64(p.Stages[i].Connections)
}

// StageSpans returns p's stages in the window: stage i starts where stage
// i-1 ends (the first at 0) and ramps from the previous stage's target
// (the first from BaseTarget). Nil without stages. This is the one place
// stage boundaries and targets are computed; the engine's schedule, the
// merge and the stop cut use it.
func (p *Plan) StageSpans() []StageSpan {
	if len(p.Stages) == 0 {
		return nil
	}
	out := make([]StageSpan, len(p.Stages))
	var at time.Duration
	from := p.BaseTarget()
	for i, st := range p.Stages {
		to := p.StageTarget(i)
		out[i] = StageSpan{Start: at, End: at + st.Duration, From: from, To: to}
		at += st.Duration
		from = to
	}
	return out
}

// Ramp returns the value at offset t of the piecewise-linear target that
// starts at base and, over consecutive spans of the given durations, ramps
// linearly to targets[i] (len(targets) == len(durations)). Before 0 it is
// base (the warm-up runs at the base target); after the last span, the last
// target; with no spans, base. The engine uses it with a worker's parts of
// the targets, TargetAt with the plan's.
func Ramp(base float64, durations []time.Duration, targets []float64, t time.Duration) float64 {
	if t < 0 {
		return base
	}
	var at time.Duration
	from := base
	for i, d := range durations {
		if t < at+d {
			return from + (targets[i]-from)*float64(t-at)/float64(d)
		}
		at += d
		from = targets[i]
	}
	return from
}

// TargetAt returns the plan's target at offset t of the window (rate in
// open loop, connections in closed loop): Ramp over its stages.
func (p *Plan) TargetAt(t time.Duration) float64 {
	durs := make([]time.Duration, len(p.Stages))
	targets := make([]float64, len(p.Stages))
	for i, st := range p.Stages {
		durs[i] = st.Duration
		targets[i] = float64(p.StageTarget(i))
	}
	return Ramp(float64(p.BaseTarget()), durs, targets, t)
}
