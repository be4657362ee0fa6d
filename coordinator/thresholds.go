package coordinator

import (
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/merge"
	"github.com/phalanxload/phalanx/internal/threshold"
	"github.com/phalanxload/phalanx/internal/wire"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// Defaults of RunOptions' abort timing (README "Thresholds").
const (
	// DefaultAbortDelay is the grace period: intervals that start earlier
	// in the window never count towards an abort (connections warming up,
	// caches filling), as k6's delayAbortEval.
	DefaultAbortDelay = 5 * time.Second
	// DefaultAbortWindow is W: a threshold that fails in every interval
	// over this long (consecutive intervals, after the grace period) ends
	// the run.
	DefaultAbortWindow = 3 * time.Second
)

// RunOptions are a run's parts besides its plan: its thresholds and
// whether they end it, and the labels the run store keeps with it.
type RunOptions struct {
	// Thresholds are evaluated on the merged window (internal/threshold's
	// grammar); their outcome is in RunResult.Thresholds.
	Thresholds []string
	// AbortOnFail ends the run early (as StopRun does) when a threshold
	// fails in every interval for AbortWindow (default
	// DefaultAbortWindow), counting only intervals that start AbortDelay
	// (default DefaultAbortDelay) or more into the window; zero or
	// negative durations mean the defaults. Per interval, latency,
	// lateness, rps and errors thresholds read the interval's merged
	// histograms and counters, a stage's only the intervals that start in
	// it, and phase thresholds (connect, tls_full, tls_resumed, ttfb,
	// service), whose histograms intervals do not keep, the window merged
	// so far.
	AbortOnFail             bool
	AbortDelay, AbortWindow time.Duration
	// Tags, Note and SearchID are stored with the run.
	Tags     []string
	Note     string
	SearchID string
}

func (o *RunOptions) setDefaults() {
	if o.AbortDelay <= 0 {
		o.AbortDelay = DefaultAbortDelay
	}
	if o.AbortWindow <= 0 {
		o.AbortWindow = DefaultAbortWindow
	}
}

// optionsFromProto reads a RunPlan request's options.
func optionsFromProto(req *pb.RunPlanRequest) RunOptions {
	return RunOptions{
		Thresholds: req.GetThresholds(), AbortOnFail: req.GetAbortOnFail(),
		AbortDelay: req.GetAbortDelay().AsDuration(), AbortWindow: req.GetAbortWindow().AsDuration(),
		Tags: req.GetTags(), Note: req.GetNote(), SearchID: req.GetSearchId(),
	}
}

// abortState is a run's --abort-on-fail bookkeeping (the run loop's).
type abortState struct {
	// since[i] is when threshold i's current streak of failing intervals
	// began, from the window's start; -1 for none.
	since []time.Duration
	// by names the threshold that ended the run, at when (the end of the
	// interval that completed its streak); empty until one did.
	by string
	at time.Duration
}

// checkAbort evaluates the thresholds on merged interval pt and ends the
// run when one has now failed for the abort window (RunOptions).
func (rn *run) checkAbort(pt *merge.Point) {
	if !rn.opts.AbortOnFail || rn.abort.by != "" || len(rn.thresholds) == 0 {
		return
	}
	if rn.abort.since == nil {
		rn.abort.since = make([]time.Duration, len(rn.thresholds))
		for i := range rn.abort.since {
			rn.abort.since[i] = -1
		}
	}
	iv := threshold.Window{Histograms: &hist.Set{}, Counts: pt.Counts, Length: pt.Length}
	if lat, err := hist.Decode(pt.Latency); err == nil {
		iv.Histograms.Latency = lat
	}
	if len(pt.Lateness) > 0 {
		if h, err := hist.Decode(pt.Lateness); err == nil {
			iv.Histograms.Lateness = h
		}
	}
	counts := rn.m.Counts()
	sofar := threshold.Window{Histograms: rn.m.Total(), Counts: &counts, Length: pt.Start + pt.Length}
	stages := rn.m.Stages()
	for i, t := range rn.thresholds {
		w := iv
		switch {
		case t.Stage >= 0:
			if t.Stage >= len(stages) || pt.Start < stages[t.Stage].Start || pt.Start >= stages[t.Stage].Start+stages[t.Stage].Duration {
				continue // not this stage's interval: its streak waits
			}
		case t.Kind != hist.Latency && t.Kind != hist.Lateness && (t.Metric != threshold.RPS && t.Metric != threshold.Errors && t.Metric != threshold.Failed):
			w = sofar
		}
		r := t.EvalWindow(w)
		if r.Pass || r.NoData || pt.Start < rn.opts.AbortDelay {
			rn.abort.since[i] = -1
			continue
		}
		if rn.abort.since[i] < 0 {
			rn.abort.since[i] = pt.Start
		}
		if end := pt.Start + pt.Length; end-rn.abort.since[i] >= rn.opts.AbortWindow {
			rn.abort.by, rn.abort.at = t.Text, end
			rn.log.Info("threshold failed for the abort window: ending the run early (--abort-on-fail)",
				"threshold", t.Text, "value", r.Value, "unit", r.Unit, "failing_since_s", rn.abort.since[i].Seconds(), "at_s", end.Seconds())
			rn.stopAgents()
			return
		}
	}
}

// evalThresholds evaluates the thresholds on the run's window (total
// counters, the merged histograms, its length) and stages.
func (rn *run) evalThresholds(total *measure.Counts, window time.Duration) []*pb.ThresholdResult {
	if len(rn.thresholds) == 0 {
		return nil
	}
	d := threshold.Data{Window: threshold.Window{Histograms: rn.m.Total(), Counts: total, Length: window}}
	for _, st := range rn.m.Stages() {
		d.Stages = append(d.Stages, threshold.Window{Histograms: &hist.Set{Latency: st.Latency}, Counts: &st.Counts, Length: st.Duration})
	}
	out := make([]threshold.Result, 0, len(rn.thresholds))
	for _, t := range rn.thresholds {
		out = append(out, t.Eval(d))
	}
	return wire.ThresholdsToProto(out)
}
