// Package report owns the run report: Run, the model of a merged result as
// the report reads it (model.go); Build, which computes the report from it
// (rates, summaries from the merged histograms, each timeline point's
// percentiles from its own histogram, the client-bound analysis; build.go);
// the provenance block (provenance.go); and one file per output format,
// text.go (wrk's layout), json.go, hgrm.go (HdrHistogram's percentile
// distribution), hlog.go (HdrHistogram's interval log) and csv.go (the
// timeline), each with a golden test (go test -update rewrites testdata).
//
// It computes nothing the result does not hold and averages no
// percentiles. It imports no proto and no gRPC: internal/wire decodes a
// RunResult into a Run (wire.RunFromProto, wire.ReportFromResult).
package report
