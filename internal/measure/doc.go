// Package measure owns the model of request outcomes: the error kinds
// (every failed request has exactly one) and Counts, the counters of an
// interval, a stage, an agent or a run, with the one adder every layer
// uses (the engine's recorder, the merge, the coordinator's totals).
//
// It is pure: no I/O, no clocks, no gRPC. Classifying an I/O error into a
// kind is the engine's (internal/engine); the proto form and its
// conversion are internal/wire's; histograms are internal/hist's.
package measure
