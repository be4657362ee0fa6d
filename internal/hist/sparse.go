package hist

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/klauspost/compress/zlib"
)

// The V2 encoding (HdrHistogram's EncodableHistogram, "V2" format):
//
//	compressed: cookie 0x1c849304 | payload length int32 | zlib(uncompressed)
//	uncompressed: cookie 0x1c849303 | counts length int32 | normalizing index
//	  offset int32 | significant digits int32 | lowest int64 | highest int64 |
//	  int-to-double ratio float64 | counts as ZigZag LEB128 varints, where a
//	  negative value is a run of that many empty buckets.
//
// All big-endian. hdrhistogram-go wraps it in base64 (the log format); Phalanx
// sends the binary form on the wire and reads both.
const (
	v2Cookie           = 0x1c849303
	v2CompressedCookie = 0x1c849304
	v2HeaderSize       = 40
)

// Sparse is a decoded histogram as (value, count) pairs in increasing value
// order: the non-empty buckets only, each value the lowest of its bucket.
type Sparse struct {
	Values []int64
	Counts []int64
	// Index holds each value's bucket index in the package's geometry
	// (what Accumulator adds by).
	Index []int32
	// Total is the sum of Counts.
	Total int64
}

// Decoder decodes V2 histograms into Sparse form, reusing its buffers and
// inflater between calls. It is not safe for concurrent use.
type Decoder struct {
	// IndexOnly makes Decode leave Sparse.Values empty (Index, Counts
	// and Total are set, all that Accumulator.Add reads): a decoding for
	// Accumulator.Add skips a value computation and an append per bucket.
	// (The coordinator's merge uses AddTo, which needs no Sparse.)
	IndexOnly bool

	zr  io.ReadCloser
	raw bytes.Buffer
	b64 []byte
	in  bytes.Reader
}

// Decode parses b (binary V2, compressed or not, or its base64 text) into s,
// replacing s's contents. It fails on corrupt input and on a geometry other
// than the package's (ErrGeometry), so that merges stay exact.
func (d *Decoder) Decode(b []byte, s *Sparse) error {
	s.Values, s.Counts, s.Index, s.Total = s.Values[:0], s.Counts[:0], s.Index[:0], 0
	raw, err := d.uncompressed(b)
	if err != nil {
		return err
	}
	return decodeRaw(raw, s, !d.IndexOnly)
}

// AddTo decodes b (any form Decode reads) straight into a, bucket by
// bucket, and returns the histogram's sample count: Decode and
// Accumulator.Add in one pass over the varints, with no Sparse in between
// (the coordinator's merge: BenchmarkMergeAgentInterval). Errors are
// Decode's; a is unchanged after one.
func (d *Decoder) AddTo(b []byte, a *Accumulator) (int64, error) {
	return d.addTo(b, a, 1)
}

// SubtractFrom undoes an AddTo of the same bytes into a, returning the
// sample count it took out: for a merge that must drop, whole, an
// interval whose later parts fail. Errors are Decode's; a is unchanged
// after one.
func (d *Decoder) SubtractFrom(b []byte, a *Accumulator) (int64, error) {
	return d.addTo(b, a, -1)
}

func (d *Decoder) addTo(b []byte, a *Accumulator, sign int64) (int64, error) {
	raw, err := d.uncompressed(b)
	if err != nil {
		return 0, err
	}
	payload, err := v2Counts(raw)
	if err != nil {
		return 0, err
	}
	total, err := a.addCounts(payload, sign)
	if err != nil {
		// Take out what the varints before the bad one added.
		_, _ = a.addCounts(payload, -sign)
		return 0, err
	}
	a.total += sign * total
	return total, nil
}

// uncompressed returns b's uncompressed V2 bytes: b itself, its base64
// decoding, or its inflated payload (in d's buffers).
func (d *Decoder) uncompressed(b []byte) ([]byte, error) {
	if len(b) >= 4 && binary.BigEndian.Uint32(b)&^0xf0 == v2Cookie {
		return b, nil // uncompressed V2 (EncodeV2): nothing to inflate
	}
	if len(b) >= 4 && binary.BigEndian.Uint32(b)&^0xf0 != v2CompressedCookie {
		// Not binary: try base64 text.
		n := base64.StdEncoding.DecodedLen(len(b))
		if cap(d.b64) < n {
			d.b64 = make([]byte, n)
		}
		m, err := base64.StdEncoding.Decode(d.b64[:n], b)
		if err != nil {
			return nil, fmt.Errorf("decode histogram: %w", err)
		}
		b = d.b64[:m]
		if len(b) >= 4 && binary.BigEndian.Uint32(b)&^0xf0 == v2Cookie {
			return b, nil
		}
	}
	if len(b) < 8 || binary.BigEndian.Uint32(b)&^0xf0 != v2CompressedCookie {
		return nil, errors.New("decode histogram: not a V2 compressed histogram")
	}
	n := int(binary.BigEndian.Uint32(b[4:8]))
	if n < 0 || n > len(b)-8 {
		return nil, fmt.Errorf("decode histogram: payload length %d, have %d bytes", n, len(b)-8)
	}
	d.in.Reset(b[8 : 8+n])
	var err error
	if d.zr == nil {
		d.zr, err = zlib.NewReader(&d.in)
	} else {
		err = d.zr.(zlib.Resetter).Reset(&d.in, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	d.raw.Reset()
	if _, err := d.raw.ReadFrom(io.LimitReader(d.zr, 64<<20)); err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	return d.raw.Bytes(), nil
}

// v2Counts checks an uncompressed V2 histogram's header (cookie, this
// package's geometry, the counts' length) and returns its counts' varints.
func v2Counts(raw []byte) ([]byte, error) {
	if len(raw) < v2HeaderSize || binary.BigEndian.Uint32(raw)&^0xf0 != v2Cookie {
		return nil, errors.New("decode histogram: bad V2 header")
	}
	countsLen := int(binary.BigEndian.Uint32(raw[4:8]))
	offset := int32(binary.BigEndian.Uint32(raw[8:12]))
	digits := int64(binary.BigEndian.Uint32(raw[12:16]))
	lowest := int64(binary.BigEndian.Uint64(raw[16:24]))
	highest := int64(binary.BigEndian.Uint64(raw[24:32]))
	if lowest != LowestUs || digits != SigFigs || highest < HighestUs || offset != 0 {
		return nil, fmt.Errorf("decode histogram: %w: lowest %d, highest %d, %d significant figures; want %d, %d, %d",
			ErrGeometry, lowest, highest, digits, LowestUs, HighestUs, SigFigs)
	}
	payload := raw[v2HeaderSize:]
	if countsLen < 0 || countsLen > len(payload) {
		return nil, fmt.Errorf("decode histogram: counts length %d, have %d bytes", countsLen, len(payload))
	}
	return payload[:countsLen], nil
}

// maxIndex is the number of buckets of the package's geometry: a decoded
// histogram's indices are below it.
var maxIndex = int64(countsLenFor(HighestUs))

// decodeRaw parses an uncompressed V2 histogram into s (emptied by the
// caller), its Values only when values is set.
func decodeRaw(raw []byte, s *Sparse, values bool) error {
	payload, err := v2Counts(raw)
	if err != nil {
		return err
	}
	var index int64
	for len(payload) > 0 {
		var v uint64
		if b := payload[0]; b < 0x80 { // one byte: most counts and short runs
			v = uint64(b)
			payload = payload[1:]
		} else {
			var k int
			if v, k = binary.Uvarint(payload); k <= 0 {
				return errors.New("decode histogram: bad varint in counts")
			}
			payload = payload[k:]
		}
		c := int64(v>>1) ^ -int64(v&1) // ZigZag
		if c < 0 {
			if c == math.MinInt64 || -c > maxIndex-index {
				return errors.New("decode histogram: zero run past the last bucket")
			}
			index += -c
			continue
		}
		if index >= maxIndex {
			return errors.New("decode histogram: bucket past the last one")
		}
		if c > 0 {
			if c > math.MaxInt64-s.Total {
				return errors.New("decode histogram: counts overflow")
			}
			if values {
				s.Values = append(s.Values, valueFromIndex(index))
			}
			s.Counts = append(s.Counts, c)
			s.Index = append(s.Index, int32(index))
			s.Total += c
		}
		index++
	}
	return nil
}

// addCounts adds sign times the V2 counts' varints in payload to a's
// buckets (not to its total), growing them as needed, with decodeRaw's
// checks, and returns the counts' sum. After an error a holds what the
// varints before the bad one added: the same payload with -sign takes
// that out (it fails at the same varint).
//
// Most varints are one byte (a count below 64 or a run of up to 64 empty
// buckets), and which of the two comes next is hard to predict: that path
// has no branch on it.
func (a *Accumulator) addCounts(payload []byte, sign int64) (int64, error) {
	c := a.counts
	fail := func(msg string) (int64, error) {
		return 0, errors.New("decode histogram: " + msg)
	}
	var index, total int64
	for i := 0; i < len(payload); {
		// Eight one-byte counts in a row (the dense middle of a latency
		// histogram: every byte even and below 0x80) add without a
		// branch each.
		if i+8 <= len(payload) && index+8 <= int64(len(c)) && total < math.MaxInt64-8*63 {
			if w := binary.LittleEndian.Uint64(payload[i:]); w&0x8181818181818181 == 0 {
				d := c[index : index+8 : index+8]
				var sum int64
				for j := range 8 {
					x := int64(w>>(8*j+1)) & 0x3f
					d[j] += sign * x
					sum += x
				}
				total += sum
				index += 8
				i += 8
				continue
			}
		}
		b := payload[i]
		if b >= 0x80 {
			v, k := binary.Uvarint(payload[i:])
			if k <= 0 {
				a.counts = c
				return fail("bad varint in counts")
			}
			i += k
			x := int64(v>>1) ^ -int64(v&1) // ZigZag
			if x < 0 {
				if x == math.MinInt64 || -x > maxIndex-index {
					a.counts = c
					return fail("zero run past the last bucket")
				}
				index += -x
				continue
			}
			if index >= maxIndex {
				a.counts = c
				return fail("bucket past the last one")
			}
			if x > math.MaxInt64-total {
				a.counts = c
				return fail("counts overflow")
			}
			if index >= int64(len(c)) {
				c = grow(c, index)
			}
			c[index] += sign * x
			total += x
			index++
			continue
		}
		i++
		// ZigZag of one byte: even b is the count b/2, odd b a run of
		// (b+1)/2 empty buckets; (b+1)/2 is both.
		run := int64(b & 1)
		v := int64(b+1) >> 1
		if index >= int64(len(c)) {
			if run == 1 {
				if v > maxIndex-index {
					a.counts = c
					return fail("zero run past the last bucket")
				}
				index += v
				continue
			}
			if index >= maxIndex {
				a.counts = c
				return fail("bucket past the last one")
			}
			c = grow(c, index)
		}
		cnt := v &^ -run // 0 for a run
		if total+cnt < 0 {
			a.counts = c
			return fail("counts overflow")
		}
		c[index] += sign * cnt
		total += cnt
		index += 1 + (v-1)&-run // 1 for a count, v for a run
		if index > maxIndex {
			a.counts = c
			return fail("zero run past the last bucket")
		}
	}
	a.counts = c
	return total, nil
}

// grow extends c through index (doubling, within the geometry's buckets).
func grow(c []int64, index int64) []int64 {
	n := min(max(index+1, 2*int64(len(c)), 2048), maxIndex)
	return append(c, make([]int64, n-int64(len(c)))...)
}

// EncodeV2 returns h in HdrHistogram's uncompressed V2 encoding (cookie
// 0x1c849303, the payload of Encode's form without zlib; see the layout
// above), which Java's decodeFromByteBuffer and Decoder.Decode read. It is
// what agents send each interval: larger than Encode's (about 1.5 times for
// a thousand distinct values) but decoded without inflating, which was half
// of the coordinator's merge cost (BenchmarkMergeAgentInterval).
func (h *Histogram) EncodeV2() []byte {
	if h.Count() == 0 {
		// Most phase histograms of an interval are empty: encode that
		// once, without copying the counts array.
		emptyV2Once.Do(func() { emptyV2 = New().encodeV2() })
		return append([]byte(nil), emptyV2...)
	}
	return h.encodeV2()
}

var (
	emptyV2Once sync.Once
	emptyV2     []byte
)

func (h *Histogram) encodeV2() []byte {
	snap := h.h.Export()
	counts := snap.Counts
	last := len(counts) - 1
	for last >= 0 && counts[last] == 0 {
		last--
	}
	out := make([]byte, v2HeaderSize, v2HeaderSize+2*(last+1)+1)
	put := func(v int64) {
		out = binary.AppendUvarint(out, uint64(v<<1)^uint64(v>>63)) // ZigZag
	}
	if last < 0 {
		put(0) // as hdrhistogram-go: counts through the max value's bucket, 0
	}
	for i := 0; i <= last; {
		if counts[i] != 0 {
			put(counts[i])
			i++
			continue
		}
		j := i
		for j <= last && counts[j] == 0 {
			j++
		}
		if j-i == 1 {
			put(0)
		} else {
			put(-int64(j - i))
		}
		i = j
	}
	binary.BigEndian.PutUint32(out[0:], v2Cookie|0x10)
	binary.BigEndian.PutUint32(out[4:], uint32(len(out)-v2HeaderSize))
	binary.BigEndian.PutUint32(out[8:], 0) // normalizing index offset
	binary.BigEndian.PutUint32(out[12:], uint32(snap.SignificantFigures))
	binary.BigEndian.PutUint64(out[16:], uint64(snap.LowestTrackableValue))
	binary.BigEndian.PutUint64(out[24:], uint64(snap.HighestTrackableValue))
	binary.BigEndian.PutUint64(out[32:], math.Float64bits(1))
	return out
}

// AddSparse adds every (value, count) of s to h: the cost is proportional
// to s's non-empty buckets, not to the histogram's size.
func (h *Histogram) AddSparse(s *Sparse) error {
	for i, v := range s.Values {
		if err := h.h.RecordValues(v, s.Counts[i]); err != nil {
			return fmt.Errorf("merge histogram: %w", err)
		}
	}
	return nil
}

// Accumulator sums decoded histograms (Sparse) bucket by bucket, by index:
// for a merge that adds many, it skips Histogram.AddSparse's mapping of
// each value back to its bucket (Decode already bounded the indices), a
// third of the coordinator's merge; Decoder.AddTo adds V2 bytes to it
// without a Sparse. The zero value is empty; it is not safe for
// concurrent use.
type Accumulator struct {
	counts []int64 // by bucket index; grown at least through the highest index added
	total  int64
}

// Add adds s's counts.
func (a *Accumulator) Add(s *Sparse) {
	if n := len(s.Index); n > 0 {
		if top := int(s.Index[n-1]) + 1; top > len(a.counts) {
			a.counts = append(a.counts, make([]int64, top-len(a.counts))...)
		}
	}
	c := a.counts
	for i, idx := range s.Index {
		c[idx] += s.Counts[i]
	}
	a.total += s.Total
}

// Merge adds o's counts to a.
func (a *Accumulator) Merge(o *Accumulator) {
	if len(o.counts) > len(a.counts) {
		a.counts = append(a.counts, make([]int64, len(o.counts)-len(a.counts))...)
	}
	c := a.counts[:len(o.counts)]
	for i, v := range o.counts {
		c[i] += v
	}
	a.total += o.total
}

// Count returns the number of samples added.
func (a *Accumulator) Count() int64 { return a.total }

// Reset empties a, keeping its storage.
func (a *Accumulator) Reset() {
	clear(a.counts)
	a.total = 0
}

// Histogram returns the sum as a new Histogram.
func (a *Accumulator) Histogram() *Histogram {
	return &Histogram{h: hdrhistogram.Import(&hdrhistogram.Snapshot{
		LowestTrackableValue: LowestUs, HighestTrackableValue: HighestUs, SignificantFigures: SigFigs, Counts: a.counts})}
}

// Geometry of the package's histograms (HdrHistogram's bucket layout for
// lowest 1, 3 significant digits): sub-buckets of 2048, half 1024.
const (
	subBucketHalfCountMagnitude = 10
	subBucketHalfCount          = 1 << subBucketHalfCountMagnitude
)

// valueFromIndex returns the lowest value of counts index i.
func valueFromIndex(i int64) int64 { return IndexLowest(i, subBucketHalfCountMagnitude) }

// IndexLowest returns the lowest value of counts index i in HdrHistogram's
// bucket layout for lowest value 1 and a sub-bucket half count of
// 2^halfMagnitude (10 for this package's 3 significant digits, 7 for 2):
// HdrHistogram's valueFromIndex.
func IndexLowest(i int64, halfMagnitude int) int64 {
	half := int64(1) << halfMagnitude
	bucket := (i >> halfMagnitude) - 1
	sub := (i & (half - 1)) + half
	if bucket < 0 {
		sub -= half
		bucket = 0
	}
	return sub << bucket
}

// countsLenFor returns the counts array length covering values up to
// highest.
func countsLenFor(highest int64) int {
	buckets := 1
	for smallestUntrackable := int64(2 * subBucketHalfCount); smallestUntrackable <= highest; smallestUntrackable <<= 1 {
		buckets++
	}
	return (buckets + 1) * subBucketHalfCount
}
