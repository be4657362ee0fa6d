package engine

import (
	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/measure"
)

// MaxMixReported bounds the requests of a mix that are measured apart
// (Result.Mix): each costs a latency histogram per worker (about 230 KB),
// so a larger mix is reported in total only.
const MaxMixReported = 16

// MixResult is one request of the mix, measured apart over the window: the
// outcomes that ended in it (as the intervals count them, Issued 0) and
// their latencies. Summed over a mix's requests, Counts are the window's.
type MixResult struct {
	Counts  measure.Counts
	Latency *hist.Histogram
}

// mixRecorder is a worker's per-request measurement of a mix: one
// MixResult per request, recorded under the recorder's lock.
type mixRecorder []MixResult

func newMixRecorder(entries int) mixRecorder {
	if entries < 2 || entries > MaxMixReported {
		return nil
	}
	m := make(mixRecorder, entries)
	for i := range m {
		m[i].Latency = hist.New()
	}
	return m
}

// record records a window outcome of request i. Called with the
// recorder's lock held.
func (m mixRecorder) record(i int, o *outcome) {
	if i >= len(m) {
		return
	}
	r := &m[i]
	if o.failed {
		r.Counts.Errors[o.kind]++
		return
	}
	r.Counts.Requests++
	r.Counts.BytesRead += o.size.wire
	r.Counts.Status[o.status]++
	r.Latency.Record(o.end.Sub(o.start))
}

// mixResults merges the workers' per-request results (nil without a
// mix measured apart). Errors: histograms that do not merge.
func (e *Engine) mixResults() ([]MixResult, error) {
	var out []MixResult
	for _, w := range e.workers {
		w.rec.mu.Lock()
		m := w.rec.mix
		if out == nil && m != nil {
			out = make([]MixResult, len(m))
			for i := range out {
				out[i].Latency = hist.New()
			}
		}
		for i := range m {
			out[i].Counts.Add(&m[i].Counts)
			if err := out[i].Latency.Merge(m[i].Latency); err != nil {
				w.rec.mu.Unlock()
				return nil, err
			}
		}
		w.rec.mu.Unlock()
	}
	return out, nil
}
