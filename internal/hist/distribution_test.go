package hist

import (
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// TestDecodeUncompressed: Decode reads the uncompressed V2 agents send
// (EncodeV2) as it reads the compressed form: the same histogram.
func TestDecodeUncompressed(t *testing.T) {
	h := New()
	for v := int64(1); v < 1_000_000; v = v*3 + 1 {
		h.RecordMicros(v)
	}
	got, err := Decode(h.EncodeV2())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equals(h.h) || got.Count() != h.Count() {
		t.Errorf("decoded %d samples, not the histogram of %d", got.Count(), h.Count())
	}
	bad := h.EncodeV2()
	bad[len(bad)-1] = 0xff // a varint cut short
	if _, err := Decode(bad); err == nil {
		t.Error("corrupt uncompressed V2 decoded")
	}
}

// TestDistributionLevels: the levels are HdrHistogram's (5 ticks per half
// distance: 0, 10, ..., 50, 55, ... 75, 77.5, ...), each step's value is
// ValueAtPercentile at its level and its count the samples up to it, and
// the last step is 100 % at the max.
func TestDistributionLevels(t *testing.T) {
	h := New()
	for v := int64(1); v <= 1000; v++ {
		h.RecordMicros(v)
	}
	steps := h.Distribution(5)
	want := []float64{0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75, 77.5}
	for i, p := range want {
		if steps[i].Percentile != p {
			t.Fatalf("step %d at %v, want %v", i, steps[i].Percentile, p)
		}
	}
	for _, s := range steps[1:] {
		if v := h.ValueAtPercentile(s.Percentile); s.Value != v || s.TotalCount != v {
			t.Errorf("step at %v: value %d count %d, want %d and %d (values 1..1000)", s.Percentile, s.Value, s.TotalCount, v, v)
		}
	}
	if last := steps[len(steps)-1]; last.Percentile != 100 || last.Value != 1000 || last.TotalCount != 1000 {
		t.Errorf("last step %+v, want 100 %% at 1000", last)
	}
	if New().Distribution(5) != nil {
		t.Error("an empty histogram has a distribution")
	}
	if b, s := Buckets(); b != 27 || s != 2048 {
		t.Errorf("Buckets() = %d, %d; want 27, 2048 (1 us to 24 h, 3 digits)", b, s)
	}
	if !New().Equals(hdrhistogram.New(LowestUs, HighestUs, SigFigs)) || h.Equals(hdrhistogram.New(LowestUs, HighestUs, SigFigs)) {
		t.Error("Equals: empty histograms differ, or a full one equals an empty one")
	}
}
