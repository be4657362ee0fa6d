package metrics

import (
	"math"
	"math/bits"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// ClassicBuckets are the upper bounds (seconds) of the latency histogram's
// classic buckets, for scrapers without native histograms: 100 µs to 10 s
// in 1-2.5-5 steps (client_golang's DefBuckets start at 5 ms, too coarse
// for a load generator's latencies).
var ClassicBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// NativeSchema is the latency histogram's native-histogram schema: bucket
// boundaries at 2^(k/2^3), a growth of about 9 % per bucket, the schema
// client_golang picks for its NativeHistogramBucketFactor 1.1.
const NativeSchema = 3

// nativeBounds are the schema's bucket boundaries within one power of two,
// as fractions in [0.5, 1) (client_golang's nativeHistogramBounds[3]):
// 2^(j/8 - 1) for j = 0..7.
var nativeBounds = [8]float64{
	0.5, 0.5452538663326288, 0.5946035575013605, 0.6484197773255048,
	0.7071067811865475, 0.7711054127039704, 0.8408964152537144, 0.9170040432046711,
}

// nativeKey returns the index of the native bucket (NativeSchema) that
// holds x > 0: bucket k covers (2^((k-1)/8), 2^(k/8)], as client_golang's
// Histogram.Observe computes it.
func nativeKey(x float64) int {
	frac, exp := math.Frexp(x)
	return sort.SearchFloat64s(nativeBounds[:], frac) + (exp-1)*len(nativeBounds)
}

// hdrRange returns the highest and the median value of the HdrHistogram
// bucket whose lowest value is v (µs), for the geometry of internal/hist
// (lowest 1, 3 significant digits: 2048 sub-buckets, so values below 2048
// are exact and a bucket above is at most 0.1 % wide). HdrHistogram's
// getBucketIndex and medianEquivalentValue compute the same.
func hdrRange(v int64) (highest, median int64) {
	const subBucketMask = 2047
	size := int64(1) << max(bits.Len64(uint64(v|subBucketMask))-11, 0)
	return v + size - 1, v + size/2
}

// latencyHistogram returns the histogram metric of latency (HdrHistogram
// buckets: lowest value in µs → count) with both classic buckets
// (ClassicBuckets) and native ones (NativeSchema): a scraper that
// negotiates the protobuf format reads the native buckets, the text format
// shows the classic ones. A sample counts in the buckets its HdrHistogram
// bucket's highest value falls in, so a bucket never holds a sample that
// may be above its bound; the sum takes each bucket's median value, as
// HdrHistogram's mean does.
func latencyHistogram(desc *prometheus.Desc, latency map[int64]int64, created time.Time, labels []string) prometheus.Metric {
	var (
		count   uint64
		sum     float64
		native  = map[int]int64{}
		classic = make([]uint64, len(ClassicBuckets))
	)
	for _, v := range sortedKeys(latency) {
		n := latency[v]
		hi, mid := hdrRange(v)
		secs := float64(hi) / 1e6
		count += uint64(n)
		sum += float64(mid) / 1e6 * float64(n)
		native[nativeKey(secs)] += n
		for i, b := range ClassicBuckets {
			if secs <= b {
				classic[i] += uint64(n)
			}
		}
	}
	m, err := prometheus.NewConstNativeHistogram(desc, count, sum, native, nil, 0, NativeSchema, 0, created, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	buckets := make([]*dto.Bucket, len(ClassicBuckets))
	for i, b := range ClassicBuckets {
		buckets[i] = &dto.Bucket{UpperBound: &b, CumulativeCount: &classic[i]}
	}
	return withClassic{m, buckets}
}

// withClassic adds classic buckets to a const native histogram, so that
// one series carries both (as a client_golang Histogram with both
// Buckets and NativeHistogramBucketFactor set does).
type withClassic struct {
	prometheus.Metric
	buckets []*dto.Bucket
}

func (h withClassic) Write(m *dto.Metric) error {
	if err := h.Metric.Write(m); err != nil {
		return err
	}
	m.Histogram.Bucket = h.buckets
	return nil
}
