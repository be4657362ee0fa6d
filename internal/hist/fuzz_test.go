package hist

import (
	"encoding/base64"
	"slices"
	"testing"
)

// FuzzDecodeSparse feeds the sparse V2 decoder (the coordinator decodes
// agents' interval histograms with it) arbitrary bytes: it must never
// panic, and whatever it accepts must be a well-formed Sparse (values
// strictly increasing, counts positive, Total their sum) that survives a
// merge and a re-encoding unchanged. A reused Decoder gives the same answer
// as a fresh one, and an IndexOnly Decoder the same indices, counts and
// total without values.
func FuzzDecodeSparse(f *testing.F) {
	h := New()
	f.Add(h.EncodeV2())
	for _, us := range []int64{1, 2, 1000, 1001, 2047, 2048, 123456, HighestUs} {
		h.RecordMicros(us)
	}
	f.Add(h.EncodeV2())
	if b, err := h.Encode(); err == nil {
		f.Add(b)
		f.Add([]byte(base64.StdEncoding.EncodeToString(b)))
	}
	f.Add([]byte{})
	f.Add([]byte{0x1c, 0x84, 0x93, 0x13, 0, 0, 0, 1})

	f.Fuzz(func(t *testing.T, b []byte) {
		var d Decoder
		var s Sparse
		if err := d.Decode(b, &s); err != nil {
			return
		}
		var sum int64
		for i, v := range s.Values {
			if s.Counts[i] <= 0 {
				t.Fatalf("count %d at value %d", s.Counts[i], v)
			}
			if i > 0 && v <= s.Values[i-1] {
				t.Fatalf("values not increasing: %d after %d", v, s.Values[i-1])
			}
			sum += s.Counts[i]
		}
		if len(s.Values) != len(s.Counts) || sum != s.Total {
			t.Fatalf("%d values, %d counts, total %d, sum %d", len(s.Values), len(s.Counts), s.Total, sum)
		}
		var again Sparse
		if err := d.Decode(b, &again); err != nil || !slices.Equal(again.Values, s.Values) || !slices.Equal(again.Counts, s.Counts) {
			t.Fatalf("a reused decoder differs: %v", err)
		}
		var idx Sparse
		if err := (&Decoder{IndexOnly: true}).Decode(b, &idx); err != nil || len(idx.Values) != 0 ||
			!slices.Equal(idx.Index, s.Index) || !slices.Equal(idx.Counts, s.Counts) || idx.Total != s.Total {
			t.Fatalf("IndexOnly decode differs: %v: %d values, %d/%d indices, total %d/%d", err, len(idx.Values), len(idx.Index), len(s.Index), idx.Total, s.Total)
		}
		m := New()
		if err := m.AddSparse(&s); err != nil {
			return // refused as an error, as the merge would
		}
		if m.Count() != s.Total {
			t.Fatalf("merged count %d, decoded total %d", m.Count(), s.Total)
		}
		var round Sparse
		if err := new(Decoder).Decode(m.EncodeV2(), &round); err != nil {
			t.Fatalf("re-encoded histogram does not decode: %v", err)
		}
		if !slices.Equal(round.Values, s.Values) || !slices.Equal(round.Counts, s.Counts) {
			t.Fatalf("round trip changed the histogram: %v/%v, want %v/%v", round.Values, round.Counts, s.Values, s.Counts)
		}
	})
}

// FuzzAddTo feeds Decoder.AddTo (the coordinator's merge decodes agents'
// interval histograms straight into its sums with it) arbitrary bytes on
// top of an accumulator already holding a histogram: it accepts exactly
// what Decode accepts, adds exactly Decode's counts and returns their
// total; what it refuses leaves the accumulator as it was; SubtractFrom
// takes what it added back out.
func FuzzAddTo(f *testing.F) {
	h := New()
	f.Add(h.EncodeV2())
	for _, us := range []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1000, 1001, 2047, 2048, 123456, HighestUs} {
		h.RecordMicros(us)
	}
	f.Add(h.EncodeV2())
	if b, err := h.Encode(); err == nil {
		f.Add(b)
	}
	base := New()
	for us := range int64(3000) {
		base.RecordMicros(us % 700)
	}
	baseV2 := base.EncodeV2()

	f.Fuzz(func(t *testing.T, b []byte) {
		var d Decoder
		var s Sparse
		decErr := d.Decode(b, &s)
		var acc, want Accumulator
		if _, err := d.AddTo(baseV2, &acc); err != nil {
			t.Fatal(err)
		}
		if _, err := d.AddTo(baseV2, &want); err != nil {
			t.Fatal(err)
		}
		before, _ := acc.Histogram().Encode()
		n, err := d.AddTo(b, &acc)
		if (err == nil) != (decErr == nil) {
			t.Fatalf("AddTo error %v, Decode error %v", err, decErr)
		}
		if err != nil {
			if got, _ := acc.Histogram().Encode(); !slices.Equal(got, before) || acc.Count() != want.Count() {
				t.Fatalf("a refused AddTo changed the accumulator (%v)", err)
			}
			return
		}
		want.Add(&s)
		gb, _ := acc.Histogram().Encode()
		wb, _ := want.Histogram().Encode()
		if n != s.Total || acc.Count() != want.Count() || !slices.Equal(gb, wb) {
			t.Fatalf("AddTo added %d samples (accumulator %d), Decode and Add %d (%d)", n, acc.Count(), s.Total, want.Count())
		}
		if _, err := d.SubtractFrom(b, &acc); err != nil {
			t.Fatal(err)
		}
		if got, _ := acc.Histogram().Encode(); !slices.Equal(got, before) {
			t.Fatal("SubtractFrom did not restore the accumulator")
		}
	})
}
