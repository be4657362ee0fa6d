package hist

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/quick"
	"time"
)

var percentiles = []float64{0, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100}

// samples draws n latencies from a heavy-tailed mix (µs up to minutes).
func samples(r *rand.Rand, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		switch r.IntN(4) {
		case 0:
			out[i] = 1 + r.Int64N(100)
		case 1:
			out[i] = 100 + r.Int64N(10_000)
		case 2:
			out[i] = int64(r.ExpFloat64() * 2000)
		default:
			out[i] = r.Int64N(int64(10 * time.Minute / time.Microsecond))
		}
	}
	return out
}

func equalDistribution(t *testing.T, got, want *Histogram) bool {
	t.Helper()
	if got.Count() != want.Count() || got.h.Min() != want.h.Min() || got.Max() != want.Max() {
		t.Logf("count/min/max = %d/%d/%d, want %d/%d/%d", got.Count(), got.h.Min(), got.Max(), want.Count(), want.h.Min(), want.Max())
		return false
	}
	for _, p := range percentiles {
		if g, w := got.ValueAtPercentile(p), want.ValueAtPercentile(p); g != w {
			t.Logf("p%v = %d, want %d", p, g, w)
			return false
		}
	}
	return true
}

// TestMergeEqualsWhole: merging k histograms equals one histogram of all
// samples (count, min, max and every percentile).
func TestMergeEqualsWhole(t *testing.T) {
	prop := func(seed uint64, kRaw, nRaw uint8) bool {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		k := 1 + int(kRaw%16)
		whole := New()
		merged := New()
		for range k {
			part := New()
			for _, v := range samples(r, int(nRaw)*8) {
				part.RecordMicros(v)
				whole.RecordMicros(v)
			}
			if err := merged.Merge(part); err != nil {
				t.Log(err)
				return false
			}
		}
		return equalDistribution(t, merged, whole)
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 60}); err != nil {
		t.Fatal(err)
	}
}

// TestEncodeDecodeRoundTrip: Decode(Encode(h)) has h's distribution, and a
// merge of decoded parts equals the whole.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	prop := func(seed uint64, nRaw uint16) bool {
		r := rand.New(rand.NewPCG(seed, 7))
		h := New()
		for _, v := range samples(r, int(nRaw%4000)) {
			h.RecordMicros(v)
		}
		b, err := h.Encode()
		if err != nil {
			t.Log(err)
			return false
		}
		d, err := Decode(b)
		if err != nil {
			t.Log(err)
			return false
		}
		return equalDistribution(t, d, h)
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 100}); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRejectsCorruptAndForeign(t *testing.T) {
	h := New()
	h.RecordMicros(42)
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][]byte{
		"empty":     nil,
		"truncated": b[:len(b)/2],
		"garbage":   []byte("not a histogram at all"),
	} {
		if _, err := Decode(in); err == nil {
			t.Errorf("Decode(%s) succeeded, want error", name)
		}
	}
	// A histogram with another geometry would merge inexactly.
	foreign := newForeign()
	if _, err := Decode(foreign); !errors.Is(err, ErrGeometry) {
		t.Errorf("Decode(2 significant figures) = %v, want ErrGeometry", err)
	}
}

func TestRecordBounds(t *testing.T) {
	h := New()
	h.Record(300 * time.Nanosecond) // below 1 µs: counted as 1 µs
	h.Record(25 * time.Hour)        // over range: counted, flagged
	if h.Count() != 2 {
		t.Fatalf("Count = %d, want 2", h.Count())
	}
	if h.OverRange() != 1 {
		t.Fatalf("OverRange = %d, want 1", h.OverRange())
	}
	if got := h.h.Min(); got != 1 {
		t.Fatalf("Min = %d, want 1", got)
	}
	if !h.h.ValuesAreEquivalent(h.Max(), HighestUs) {
		t.Fatalf("Max = %d, want ~%d", h.Max(), HighestUs)
	}
}

func TestSummarizeEmptyIsNil(t *testing.T) {
	if s := New().Summarize(); s != nil {
		t.Fatalf("Summarize(empty) = %+v, want nil", s)
	}
	h := New()
	for v := int64(1); v <= 1000; v++ {
		h.RecordMicros(v)
	}
	s := h.Summarize()
	if s.Count != 1000 || s.Min != 1 || s.Max != 1000 || s.P50 != 500 || s.P99 != 990 || s.Mean != 500.5 {
		t.Fatalf("Summarize(1..1000) = %+v", s)
	}
}

// TestSparseDecodeMergeEqualsDense: decoding to sparse form and adding it
// gives the same distribution as the library's dense decode and merge, for
// binary and base64 input.
func TestSparseDecodeMergeEqualsDense(t *testing.T) {
	var d Decoder
	var s Sparse
	prop := func(seed uint64, nRaw uint16) bool {
		r := rand.New(rand.NewPCG(seed, 11))
		h := New()
		for _, v := range samples(r, int(nRaw%3000)) {
			h.RecordMicros(v)
		}
		b, err := h.Encode()
		if err != nil {
			t.Log(err)
			return false
		}
		v2 := h.EncodeV2()
		for _, in := range [][]byte{b, []byte(base64.StdEncoding.EncodeToString(b)), v2, []byte(base64.StdEncoding.EncodeToString(v2))} {
			if err := d.Decode(in, &s); err != nil {
				t.Log(err)
				return false
			}
			got := New()
			if err := got.AddSparse(&s); err != nil || s.Total != h.Count() {
				t.Log(err, s.Total, h.Count())
				return false
			}
			if !equalDistribution(t, got, h) {
				return false
			}
		}
		return true
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 50}); err != nil {
		t.Fatal(err)
	}
	// Corrupt and foreign input fail.
	h := New()
	h.RecordMicros(7)
	b, _ := h.Encode()
	v2 := h.EncodeV2()
	for name, in := range map[string][]byte{"truncated": b[:len(b)-3], "garbage": []byte("??"), "empty": nil,
		"v2 truncated": v2[:len(v2)-1], "v2 header only": v2[:20]} {
		if err := d.Decode(in, &s); err == nil {
			t.Errorf("Decode(%s) succeeded", name)
		}
	}
	if err := d.Decode(newForeign(), &s); !errors.Is(err, ErrGeometry) {
		t.Errorf("Decode(foreign) = %v, want ErrGeometry", err)
	}
}

// TestEncodeV2IsTheCompressedPayload: EncodeV2 is byte for byte what
// hdrhistogram-go deflates inside its V2 compressed encoding (Encode), so
// any HdrHistogram implementation reads it as it reads that.
func TestEncodeV2IsTheCompressedPayload(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 1000, 20000} {
		h := New()
		for _, v := range samples(r, n) {
			h.RecordMicros(v)
		}
		b, err := h.Encode()
		if err != nil {
			t.Fatal(err)
		}
		zr, err := zlib.NewReader(bytes.NewReader(b[8:]))
		if err != nil {
			t.Fatal(err)
		}
		inner, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.EncodeV2(); !bytes.Equal(got, inner) {
			t.Errorf("%d samples: EncodeV2 = %d bytes %x..., the compressed encoding holds %d bytes %x...", n, len(got), got[:min(48, len(got))], len(inner), inner[:min(48, len(inner))])
		}
	}
}

// TestWithinStdev: the share of values within mean ± stdev, as wrk's
// "+/- Stdev" counts it.
func TestWithinStdev(t *testing.T) {
	h := New()
	if got := h.WithinStdev(); got != 0 {
		t.Errorf("empty: WithinStdev() = %v, want 0", got)
	}
	// 8 values at 100 µs and one each at 10 µs and 1000 µs: mean 172, sd
	// about 268, so [-96, 440] holds the 8 and the 10 µs one.
	for range 8 {
		h.RecordMicros(100)
	}
	h.RecordMicros(10)
	h.RecordMicros(1000)
	if got := h.WithinStdev(); got != 90 {
		t.Errorf("WithinStdev() = %v, want 90", got)
	}
	c := New()
	c.RecordMicros(500)
	if got := c.WithinStdev(); got != 100 {
		t.Errorf("one value: WithinStdev() = %v, want 100", got)
	}
}

// TestAccumulatorEqualsAddSparse: summing decoded histograms by bucket
// index (Accumulator) gives byte for byte the encoding of adding them
// value by value (AddSparse), over several histograms of different
// spreads, and Reset empties it.
func TestAccumulatorEqualsAddSparse(t *testing.T) {
	var d Decoder
	var s Sparse
	prop := func(seed uint64, parts uint8) bool {
		r := rand.New(rand.NewPCG(seed, 12))
		var acc Accumulator
		want := New()
		for range int(parts%6) + 1 {
			h := New()
			for _, v := range samples(r, r.IntN(3000)) {
				h.RecordMicros(v)
			}
			if err := d.Decode(h.EncodeV2(), &s); err != nil {
				t.Log(err)
				return false
			}
			acc.Add(&s)
			if err := want.AddSparse(&s); err != nil {
				t.Log(err)
				return false
			}
		}
		got := acc.Histogram()
		gb, err1 := got.Encode()
		wb, err2 := want.Encode()
		if err1 != nil || err2 != nil || !bytes.Equal(gb, wb) || acc.Count() != want.Count() || got.Count() != want.Count() {
			t.Logf("seed %d: %d parts: accumulator %d samples, AddSparse %d (%v, %v)", seed, parts%6+1, got.Count(), want.Count(), err1, err2)
			return false
		}
		acc.Reset()
		return acc.Count() == 0 && acc.Histogram().Count() == 0
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 50}); err != nil {
		t.Fatal(err)
	}
}

// TestResetReuse: a histogram reset after samples (some over range) and
// then reused encodes exactly as a fresh one holding only the new samples;
// resetting an empty one (the cheap path, which skips clearing the counts)
// leaves it empty and reusable too.
func TestResetReuse(t *testing.T) {
	h := New()
	for _, v := range []int64{3, 250, 9_000, HighestUs + 5} {
		h.RecordMicros(v)
	}
	h.Reset()
	if h.Count() != 0 || h.OverRange() != 0 || h.Max() != 0 {
		t.Fatalf("after Reset: count %d, over range %d, max %d; want 0, 0, 0", h.Count(), h.OverRange(), h.Max())
	}
	h.Reset() // empty: the skipped clear
	want := New()
	for _, v := range []int64{7, 7, 1_200} {
		h.RecordMicros(v)
		want.RecordMicros(v)
	}
	if !bytes.Equal(h.EncodeV2(), want.EncodeV2()) {
		t.Errorf("reused histogram encodes differently from a fresh one with the same samples")
	}
	if h.Count() != 3 || h.Max() != want.Max() {
		t.Errorf("reused: count %d max %d, want 3 and %d", h.Count(), h.Max(), want.Max())
	}
}

// TestAddToEqualsDecodeAdd: decoding V2 bytes straight into an
// accumulator (AddTo, compressed, uncompressed or base64) sums exactly
// what Decode then Add sums, and returns each histogram's count;
// SubtractFrom takes each one back out to empty; a histogram corrupt past
// its first buckets leaves the accumulator as it was.
func TestAddToEqualsDecodeAdd(t *testing.T) {
	var d Decoder
	var s Sparse
	prop := func(seed uint64, parts uint8) bool {
		r := rand.New(rand.NewPCG(seed, 13))
		var got, want Accumulator
		var encs [][]byte
		for i := range int(parts%6) + 1 {
			h := New()
			for _, v := range samples(r, r.IntN(3000)) {
				h.RecordMicros(v)
			}
			b := h.EncodeV2()
			switch i % 3 {
			case 1:
				b, _ = h.Encode()
			case 2:
				b = []byte(base64.StdEncoding.EncodeToString(b))
			}
			encs = append(encs, b)
			if err := d.Decode(b, &s); err != nil {
				t.Log(err)
				return false
			}
			want.Add(&s)
			n, err := d.AddTo(b, &got)
			if err != nil || n != h.Count() {
				t.Logf("seed %d: AddTo %d samples of %d (%v)", seed, n, h.Count(), err)
				return false
			}
		}
		gb, err1 := got.Histogram().Encode()
		wb, err2 := want.Histogram().Encode()
		if err1 != nil || err2 != nil || !bytes.Equal(gb, wb) || got.Count() != want.Count() {
			t.Logf("seed %d: AddTo holds %d samples, Decode and Add %d", seed, got.Count(), want.Count())
			return false
		}
		// Corrupt a copy of the last histogram's uncompressed form after
		// its first varint: AddTo fails and got is unchanged.
		h := got.Histogram()
		bad := h.EncodeV2()
		if len(bad) > v2HeaderSize+2 {
			bad[len(bad)-1] = 0x80 // a varint that never ends
			if _, err := d.AddTo(bad, &got); err == nil {
				t.Logf("seed %d: AddTo took a truncated varint", seed)
				return false
			}
			if b, _ := got.Histogram().Encode(); !bytes.Equal(b, gb) || got.Count() != want.Count() {
				t.Logf("seed %d: a failed AddTo changed the accumulator", seed)
				return false
			}
		}
		for _, b := range encs {
			if _, err := d.SubtractFrom(b, &got); err != nil {
				t.Log(err)
				return false
			}
		}
		return got.Count() == 0 && got.Histogram().Count() == 0
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 50}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAddTo decodes one busy agent-interval's latency histogram (a
// keep-alive run at about 20,000 requests a second, a thousand distinct
// values and a tail) into an accumulator, and reports ns per varint of
// its counts: the coordinator's merge cost per histogram.
func BenchmarkAddTo(b *testing.B) {
	h := busyLatencies(rand.New(rand.NewPCG(1, 2)), 20000, 1000, 2_000_000)
	enc := h.EncodeV2()
	payload, err := v2Counts(enc)
	if err != nil {
		b.Fatal(err)
	}
	varints := 0
	for _, c := range payload {
		if c < 0x80 {
			varints++
		}
	}
	var d Decoder
	var a Accumulator
	b.ResetTimer()
	for range b.N {
		if _, err := d.AddTo(enc, &a); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(varints), "ns/varint")
	b.ReportMetric(float64(varints), "varints")
	b.ReportMetric(float64(len(enc)), "bytes")
}

// BenchmarkEncode encodes, as the coordinator does at every interval's
// end, the latency histogram of many busy agents merged (2 million
// samples, BenchmarkAddTo's spread with a tail to 5 s), and reports its
// encoded bytes.
func BenchmarkEncode(b *testing.B) {
	h := busyLatencies(rand.New(rand.NewPCG(3, 4)), 2_000_000, 100, 5_000_000)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		enc, err := h.Encode()
		if err != nil {
			b.Fatal(err)
		}
		n = len(enc)
	}
	b.ReportMetric(float64(n), "bytes")
}

// busyLatencies returns n latencies of a busy keep-alive run: 200 µs plus
// an exponential of mean 600 µs, one in tailEvery of them 10 ms plus up to
// tailUs instead.
func busyLatencies(r *rand.Rand, n, tailEvery int, tailUs int64) *Histogram {
	h := New()
	for range n {
		v := int64(200 + r.ExpFloat64()*600)
		if r.IntN(tailEvery) == 0 {
			v = 10_000 + r.Int64N(tailUs)
		}
		h.RecordMicros(v)
	}
	return h
}
