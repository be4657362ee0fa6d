package hist

import (
	"cmp"
	"slices"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Step is one line of a percentile distribution: the level iterated to (a
// percentile, 0-100), the highest equivalent value reached there (µs) and
// the count of values up to it.
type Step struct {
	Percentile float64
	Value      int64
	TotalCount int64
}

// Distribution returns h's percentile distribution at the levels
// HdrHistogram's PercentileIterator visits (Java's
// outputPercentileDistribution, the .hgrm files of wrk2):
// ticksPerHalfDistance levels in each half of the distance to 100 % (5 in
// HdrHistogram's default), up to the level reached at the largest value,
// then 100. The levels are hdrhistogram-go's CumulativeDistributionWithTicks.
// Each step's value is ValueAtPercentile at its level, the percentile every
// report of Phalanx prints (hdrhistogram-go's nearest rank, p/100·count +
// 0.5 rounded down), and its count the samples at or below that value. The
// level 0 step is the lowest bucket's highest equivalent value, as Java's.
// Java's iterator takes the first bucket whose cumulative count reaches the
// level (rank rounded up): where p/100·count has a fraction below one half
// its line may show the bucket before Java's. Nil for an empty histogram.
func (h *Histogram) Distribution(ticksPerHalfDistance int32) []Step {
	if h.Count() == 0 {
		return nil
	}
	bars := h.h.Distribution() // every bucket up to the largest value, in order
	cum := make([]int64, len(bars))
	var total int64
	for i, b := range bars {
		total += b.Count
		cum[i] = total
	}
	countTo := func(v int64) int64 {
		i, _ := slices.BinarySearchFunc(bars, v, func(b hdrhistogram.Bar, v int64) int { return cmp.Compare(b.To, v) })
		if i >= len(cum) {
			return total
		}
		return cum[i]
	}
	brackets := h.h.CumulativeDistributionWithTicks(ticksPerHalfDistance)
	out := make([]Step, len(brackets))
	for i, b := range brackets {
		v := b.ValueAt
		if b.Quantile > 0 {
			v = h.ValueAtPercentile(b.Quantile)
		}
		out[i] = Step{Percentile: b.Quantile, Value: v, TotalCount: countTo(v)}
	}
	return out
}

// Mean returns the mean of the recorded values, µs, unrounded (each value
// taken at its bucket's median equivalent, as HdrHistogram's getMean); 0
// when empty.
func (h *Histogram) Mean() float64 { return h.h.Mean() }

// StdDev returns the standard deviation of the recorded values, µs,
// unrounded (HdrHistogram's getStdDeviation); 0 when empty.
func (h *Histogram) StdDev() float64 { return h.h.StdDev() }

// Buckets returns the package geometry's bucket and sub-bucket counts, as
// HdrHistogram's .hgrm footer prints them (#[Buckets = ..., SubBuckets =
// ...]).
func Buckets() (buckets, subBuckets int) {
	return countsLenFor(HighestUs)/subBucketHalfCount - 1, 2 * subBucketHalfCount
}

// Equals reports whether o, a histogram of hdrhistogram-go (as its log
// reader returns them), has h's geometry and the same count in every
// bucket: an exact comparison.
func (h *Histogram) Equals(o *hdrhistogram.Histogram) bool { return h.h.Equals(o) }
