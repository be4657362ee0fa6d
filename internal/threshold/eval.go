package threshold

import (
	"time"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
)

// Window is what a threshold is evaluated on: a window's (or a stage's,
// or one interval's) merged histograms and counters and its length.
// Histograms may hold nil kinds (or be nil): a latency threshold on a kind
// the window lacks has no data.
type Window struct {
	Histograms *hist.Set
	Counts     *measure.Counts
	Length     time.Duration
}

// Data is a run's windows: the whole window and each plan stage's, in
// stage index order.
type Data struct {
	Window Window
	Stages []Window
}

// Result is one threshold's outcome. Value is in Unit (see
// Threshold.Unit); NoData is set when the window held no sample of the
// metric (no completed response, no handshake of the phase, a zero-length
// window, a stage the run never reached): it never passes, since nothing
// shows that it holds.
type Result struct {
	Threshold string
	Value     float64
	Unit      string
	Pass      bool
	NoData    bool
	// Limit is the threshold's bound in Unit; Metric what it reads (a
	// histogram's name, hist.Kind, for a latency metric; "rps", "errors"
	// or "failed"); Percentile the pNN of a percentile metric (0
	// otherwise).
	Limit      float64
	Metric     string
	Percentile float64
}

// Eval evaluates t on d: on its stage's window when it is scoped to one.
func (t Threshold) Eval(d Data) Result {
	if t.Stage >= 0 {
		if t.Stage >= len(d.Stages) {
			r := t.result()
			r.NoData = true
			return r
		}
		return t.EvalWindow(d.Stages[t.Stage])
	}
	return t.EvalWindow(d.Window)
}

// EvalWindow evaluates t on w, ignoring its stage scope.
func (t Threshold) EvalWindow(w Window) Result {
	r := t.result()
	v, ok := t.value(w)
	if !ok {
		r.NoData = true
		return r
	}
	r.Value = v
	switch t.Op {
	case Less:
		r.Pass = v < t.Limit
	case LessEq:
		r.Pass = v <= t.Limit
	case Greater:
		r.Pass = v > t.Limit
	case GreaterEq:
		r.Pass = v >= t.Limit
	}
	return r
}

// result returns t's Result before evaluation.
func (t Threshold) result() Result {
	r := Result{Threshold: t.Text, Unit: t.Unit(), Limit: t.Limit, Metric: t.Kind.String()}
	switch t.Metric {
	case RPS:
		r.Metric = "rps"
	case Errors:
		r.Metric = "errors"
	case Failed:
		r.Metric = "failed"
	case Percentile:
		r.Percentile = t.Percentile
	}
	return r
}

// value returns the metric's value on w; false when w has no sample of it.
func (t Threshold) value(w Window) (float64, bool) {
	switch t.Metric {
	case RPS:
		if w.Counts == nil || w.Length <= 0 {
			return 0, false
		}
		n := w.Counts.Requests
		if t.Kind == hist.OK {
			n -= nonOK(w.Counts) // ok.rps: status 200-399 only
		}
		return float64(n) / w.Length.Seconds(), true
	case Errors, Failed:
		if w.Counts == nil {
			return 0, false
		}
		failed := float64(w.Counts.ErrorTotal()) // the report's Errors line
		if t.Metric == Failed {
			failed += float64(nonOK(w.Counts)) // and its Non-2xx or 3xx responses
		}
		if !t.Rate {
			return failed, true
		}
		ended := w.Counts.Ended()
		if ended == 0 {
			return 0, false
		}
		return failed / float64(ended), true
	}
	if w.Histograms == nil {
		return 0, false
	}
	h := w.Histograms.Get(t.Kind)
	if h == nil || h.Count() == 0 {
		return 0, false
	}
	switch t.Metric {
	case Max:
		return float64(h.Max()), true
	case Mean:
		return h.Summarize().Mean, true
	}
	return float64(h.ValueAtPercentile(t.Percentile)), true
}

// nonOK counts c's responses outside 200-399 (as the report's
// non_2xx_3xx).
func nonOK(c *measure.Counts) int64 {
	var n int64
	for code, v := range c.Status {
		if code < 200 || code > 399 {
			n += v
		}
	}
	return n
}
