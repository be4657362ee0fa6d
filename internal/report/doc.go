// Package report owns the run report: the model built from a coordinator's
// merged RunResult (percentiles computed once, from the merged histogram),
// and its renderers: wrk-style text and JSON. It computes nothing that the
// result does not hold, and averages no percentiles.
package report
