// Package hist owns Phalanx's latency histograms: the HdrHistogram geometry
// every agent records with, the V2 compressed wire encoding, exact merging and
// the summaries (min, mean, stdev, percentiles) the reports print, and Set:
// the named histograms of an interval, stage or run (latency, service,
// connect, tls_full, tls_resumed, ttfb; Kind names each, in one order).
//
// Values are microseconds. It leaves recording policy (which latency, when to
// swap intervals) to internal/engine and rendering to internal/report.
package hist
