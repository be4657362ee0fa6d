package metrics

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/phalanxload/phalanx/internal/hist"
)

// TestLatencyHistogramAsClientGolang: for latencies HdrHistogram keeps
// exactly (under 2048 µs), the histogram built from HdrHistogram buckets
// has the classic and native buckets, count and sum that client_golang's
// own Histogram (the same classic buckets, NativeHistogramBucketFactor
// 1.1) has after observing every sample.
func TestLatencyHistogramAsClientGolang(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ref", Buckets: ClassicBuckets, NativeHistogramBucketFactor: 1.1})
	buckets := map[int64]int64{}
	for range 20000 {
		us := int64(1 + rng.IntN(2047))
		if rng.IntN(10) == 0 {
			us = 1 << rng.IntN(11) // powers of two: native bucket boundaries
		}
		buckets[us]++
		ref.Observe(float64(us) / 1e6)
	}
	var want, got dto.Metric
	if err := ref.Write(&want); err != nil {
		t.Fatal(err)
	}
	desc := prometheus.NewDesc("latency", "", nil, nil)
	if err := latencyHistogram(desc, buckets, time.Now(), nil).Write(&got); err != nil {
		t.Fatal(err)
	}
	w, g := want.GetHistogram(), got.GetHistogram()
	if g.GetSampleCount() != w.GetSampleCount() || math.Abs(g.GetSampleSum()-w.GetSampleSum()) > 1e-9*w.GetSampleSum() {
		t.Errorf("count %d sum %v, want %d %v", g.GetSampleCount(), g.GetSampleSum(), w.GetSampleCount(), w.GetSampleSum())
	}
	if g.GetSchema() != w.GetSchema() || g.GetSchema() != NativeSchema {
		t.Errorf("schema %d, want %d", g.GetSchema(), w.GetSchema())
	}
	if len(g.GetBucket()) != len(w.GetBucket()) {
		t.Fatalf("%d classic buckets, want %d", len(g.GetBucket()), len(w.GetBucket()))
	}
	for i, b := range w.GetBucket() {
		if gb := g.GetBucket()[i]; gb.GetUpperBound() != b.GetUpperBound() || gb.GetCumulativeCount() != b.GetCumulativeCount() {
			t.Errorf("classic bucket %d: le %v count %d, want le %v count %d", i, gb.GetUpperBound(), gb.GetCumulativeCount(), b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
	if gn, wn := nativeCounts(g), nativeCounts(w); len(gn) != len(wn) {
		t.Errorf("native buckets %v, want %v", gn, wn)
	} else {
		for k, n := range wn {
			if gn[k] != n {
				t.Errorf("native bucket %d: %d, want %d", k, gn[k], n)
			}
		}
	}
}

// nativeCounts returns a native histogram's positive buckets: index →
// count, from its spans and deltas.
func nativeCounts(h *dto.Histogram) map[int]int64 {
	out := map[int]int64{}
	idx, d, count := 0, 0, int64(0)
	for _, s := range h.GetPositiveSpan() {
		idx += int(s.GetOffset())
		for range s.GetLength() {
			count += h.GetPositiveDelta()[d]
			if count != 0 {
				out[idx] = count
			}
			d++
			idx++
		}
	}
	return out
}

// TestHDRRange: hdrRange gives the bounds of the HdrHistogram bucket
// internal/hist records a value in: a value v lands in the bucket whose
// lowest value l has hdrRange(l) >= v, and the value after its highest
// starts the next bucket.
func TestHDRRange(t *testing.T) {
	var dec hist.Decoder
	var s hist.Sparse
	for _, v := range []int64{1, 2047, 2048, 2049, 4095, 4096, 4099, 100_000, 1_234_567, 86_000_000_000} {
		h := hist.New()
		h.RecordMicros(v)
		if err := dec.Decode(h.EncodeV2(), &s); err != nil || len(s.Values) != 1 {
			t.Fatalf("record %d: %v %v", v, err, s)
		}
		lo := s.Values[0]
		hi, mid := hdrRange(lo)
		if v < lo || v > hi || mid < lo || mid > hi {
			t.Errorf("hdrRange(%d) = %d, %d: want [lowest %d, highest] to hold %d", lo, hi, mid, lo, v)
		}
		h.Reset()
		h.RecordMicros(hi + 1)
		if err := dec.Decode(h.EncodeV2(), &s); err != nil || s.Values[0] != hi+1 {
			t.Errorf("hdrRange(%d) = %d: %d is in the bucket of %v, want its own", lo, hi, hi+1, s.Values)
		}
	}
}
