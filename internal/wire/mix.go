package wire

import (
	"fmt"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/report"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// MixToProto converts a mix's per-request results. Errors: a histogram
// that does not encode.
func MixToProto(mix []report.MixRun) ([]*pb.MixResult, error) {
	var out []*pb.MixResult
	for i := range mix {
		b, err := mix[i].Latency.Encode()
		if err != nil {
			return nil, fmt.Errorf("mix request %d: %w", i, err)
		}
		out = append(out, &pb.MixResult{Counters: CountsToProto(&mix[i].Counts), Latency: b})
	}
	return out, nil
}

// MixFromProto decodes a mix's per-request results from another machine,
// checking them as CountsFromProto does and that every latency histogram
// holds one sample per completed response. Errors name the request.
func MixFromProto(m []*pb.MixResult) ([]report.MixRun, error) {
	var out []report.MixRun
	for i, e := range m {
		c, err := CountsFromProto(e.GetCounters())
		if err != nil {
			return nil, fmt.Errorf("mix request %d: %w", i, err)
		}
		h, err := hist.Decode(e.GetLatency())
		if err != nil {
			return nil, fmt.Errorf("mix request %d: %w", i, err)
		}
		if h.Count() != c.Requests {
			return nil, fmt.Errorf("mix request %d: latency histogram holds %d samples, counters say %d requests", i, h.Count(), c.Requests)
		}
		out = append(out, report.MixRun{Counts: c, Latency: h})
	}
	return out, nil
}

// MergeMix adds o's per-request results into m (same mix, same order),
// allocating m on the first. Errors: different lengths, or histograms that
// do not merge.
func MergeMix(m []report.MixRun, o []report.MixRun) ([]report.MixRun, error) {
	if m == nil {
		m = make([]report.MixRun, len(o))
		for i := range m {
			m[i].Latency = hist.New()
		}
	}
	if len(o) != len(m) {
		return m, fmt.Errorf("mix of %d requests, want %d", len(o), len(m))
	}
	for i := range o {
		m[i].Counts.Add(&o[i].Counts)
		if err := m[i].Latency.Merge(o[i].Latency); err != nil {
			return m, fmt.Errorf("mix request %d: %w", i, err)
		}
	}
	return m, nil
}
