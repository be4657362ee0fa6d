// Package merge owns the exact merge of a run's measurements: agents'
// interval histograms and counters in; out the timeline (one point per
// interval, merged across agents, with its merged latency histogram), the
// per-stage results, the window's histogram set and counters, and the
// window and stage cuts of a run stopped early.
//
// Merges are exact: every agent records with internal/hist's geometry, so
// the sum of any split of the samples equals one recorder's histogram.
// Stage boundaries and targets come from internal/plan (StageSpans,
// TargetAt). It is pure: no I/O, no clocks, no gRPC, no engine. Decoding
// the wire messages and placing an agent's interval in the coordinator's
// clock are the coordinator's (via internal/wire); rendering is
// internal/report's.
package merge
