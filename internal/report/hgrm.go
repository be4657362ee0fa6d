package report

import (
	"io"
	"math"

	"github.com/phalanxload/phalanx/internal/hist"
	"github.com/phalanxload/phalanx/internal/plan"
)

// HgrmTicksPerHalfDistance is the .hgrm files' percentile ticks per half
// distance to 100 %: HdrHistogram's default (outputPercentileDistribution's
// percentileTicksPerHalfDistance 5, as wrk2 prints).
const HgrmTicksPerHalfDistance = 5

// HgrmScale is the .hgrm files' value unit scaling ratio: histograms hold
// µs and the files print ms (value / 1000), as wrk2 does (its --u_latency
// prints µs with ratio 1) and as HdrHistogram's plotter expects by default.
const HgrmScale = 1000.0

// WriteHgrm writes h's percentile distribution in the layout of
// HdrHistogram's Java AbstractHistogram.outputPercentileDistribution
// (plain text, not CSV), which wrk2 prints and HdrHistogram's plotter
// (hdrhistogram.github.io/HdrHistogram/plotFiles.html) reads:
//
//	       Value     Percentile TotalCount 1/(1-Percentile)
//
//	       0.480 0.000000000000          1           1.00
//	...
//	       1.000 1.000000000000        100
//	#[Mean    =        0.671, StdDeviation   =        0.188]
//	#[Max     =        1.000, Total count    =          100]
//	#[Buckets =           27, SubBuckets     =         2048]
//
// Values are divided by scale (HgrmScale: µs to ms) and printed with 3
// decimals (the histograms' 3 significant digits); each line is a step of
// hist.Histogram.Distribution with ticksPerHalfDistance ticks, its
// percentile as a fraction with 12 decimals; the last (100 %) line has no
// 1/(1-Percentile). An empty histogram writes the header and the footer
// with zeros, as Java does.
func WriteHgrm(w io.Writer, h *hist.Histogram, ticksPerHalfDistance int32, scale float64) error {
	p := &printer{w: w}
	p.f("%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)")
	for _, s := range h.Distribution(ticksPerHalfDistance) {
		q := s.Percentile / 100
		if s.Percentile != 100 {
			p.f("%12.*f %2.12f %10d %14.2f\n", hist.SigFigs, float64(s.Value)/scale, q, s.TotalCount, 1/(1-q))
		} else {
			p.f("%12.*f %2.12f %10d\n", hist.SigFigs, float64(s.Value)/scale, q, s.TotalCount)
		}
	}
	buckets, subBuckets := hist.Buckets()
	maxV := 0.0
	if h.Count() > 0 {
		maxV = float64(h.Max()) / scale
	}
	p.f("#[Mean    = %12.*f, StdDeviation   = %12.*f]\n", hist.SigFigs, finite(h.Mean()/scale), hist.SigFigs, finite(h.StdDev()/scale))
	p.f("#[Max     = %12.*f, Total count    = %12d]\n", hist.SigFigs, maxV, h.Count())
	p.f("#[Buckets = %12d, SubBuckets     = %12d]\n", buckets, subBuckets)
	return p.err
}

// finite returns f, or 0 for NaN and infinities (an empty histogram's
// mean).
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// HgrmFile is one .hgrm file a run's report writes: its name's suffix
// after the prefix ("latency" gives PREFIX-latency.hgrm) and its
// histogram.
type HgrmFile struct {
	Name      string
	Histogram *hist.Histogram
}

// HgrmFiles returns the .hgrm files of run r (coordctl run --hgrm PREFIX
// writes each as PREFIX-NAME.hgrm): latency; in open loop service_time
// (from the actual send) and lateness (send lateness); and the phases
// connect, tls_full, tls_resumed and ttfb, and for a connection rate
// handshake_latency (from each connection's intended start: the text
// report's "Handshake lat", JSON handshake_latency_us). Each is the window's histogram
// merged across agents. A phase with no sample (no new connection in the
// window, no resumption) is left out; latency is always written.
func HgrmFiles(r *Run) []HgrmFile {
	hs := r.Histograms
	out := []HgrmFile{{"latency", hs.Latency}}
	add := func(name string, h *hist.Histogram) {
		if h != nil && h.Count() > 0 {
			out = append(out, HgrmFile{name, h})
		}
	}
	if r.Load == plan.OpenLoop {
		add("service_time", hs.Service)
		add("lateness", hs.Lateness)
	}
	add("connect", hs.Connect)
	add("tls_full", hs.TLSFull)
	add("tls_resumed", hs.TLSResumed)
	add("ttfb", hs.TTFB)
	add("handshake_latency", hs.HandshakeLatency)
	return out
}
